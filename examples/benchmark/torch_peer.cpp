// libtorch peer for Kiln's benchmark: the models of shared/docs/BENCHMARKS.md.
#include <torch/torch.h>

#include "core_latency.h"
#include "fma_peak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

using torch::Tensor;
namespace F = torch::nn::functional;

// Multi-head attention over already projected q [B,Tq,d], k|v [B,Tk,d].
Tensor attend(Tensor q, Tensor k, Tensor v, int64_t heads,
              const Tensor &causal) {
  int64_t b = q.size(0), tq = q.size(1), tk = k.size(1), d = q.size(2);
  int64_t dh = d / heads;
  q = q.view({b, tq, heads, dh}).transpose(1, 2);
  k = k.view({b, tk, heads, dh}).transpose(1, 2);
  v = v.view({b, tk, heads, dh}).transpose(1, 2);
  Tensor att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(dh));
  if (causal.defined()) {
    att = att.masked_fill(causal.slice(0, 0, tq).slice(1, 0, tk),
                          -std::numeric_limits<float>::infinity());
  }
  att = torch::softmax(att, -1);
  return torch::matmul(att, v).transpose(1, 2).contiguous().view({b, tq, d});
}

Tensor causalMask(int64_t t) {
  return torch::ones({t, t}, torch::kBool).triu(1);
}

torch::nn::LayerNorm layerNorm(int64_t d) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({d}).eps(1e-5).elementwise_affine(true));
}

struct Config {
  int64_t vocab, d, heads, layers, dff, t, b;
};

// GPT-2 style pre-LN decoder with fused QKV and a tied head.
struct GptBlock : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  int64_t heads;
  GptBlock(const Config &c) : heads(c.heads) {
    ln1 = register_module("ln1", layerNorm(c.d));
    qkv = register_module("qkv", torch::nn::Linear(c.d, 3 * c.d));
    proj = register_module("proj", torch::nn::Linear(c.d, c.d));
    ln2 = register_module("ln2", layerNorm(c.d));
    fc1 = register_module("fc1", torch::nn::Linear(c.d, c.dff));
    fc2 = register_module("fc2", torch::nn::Linear(c.dff, c.d));
  }
  Tensor forward(Tensor x, const Tensor &mask) {
    auto parts = qkv(ln1(x)).chunk(3, -1);
    x = x + proj(attend(parts[0], parts[1], parts[2], heads, mask));
    return x + fc2(F::gelu(fc1(ln2(x)))); // erf GELU
  }
};

struct Gpt : torch::nn::Module {
  Tensor wte, wpe, mask;
  std::vector<std::shared_ptr<GptBlock>> blocks;
  torch::nn::LayerNorm lnf{nullptr};
  Gpt(const Config &c) {
    wte = register_parameter("wte", torch::empty({c.vocab, c.d}));
    wpe = register_parameter("wpe", torch::empty({c.t, c.d}));
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks.push_back(register_module("h" + std::to_string(i),
                                       std::make_shared<GptBlock>(c)));
    }
    lnf = register_module("ln_f", layerNorm(c.d));
    mask = register_buffer("mask", causalMask(c.t));
    torch::NoGradGuard ng;
    for (auto &p : named_parameters()) {
      if (p.value().dim() == 2) {
        p.value().normal_(0.0, 0.02);
      } else if (p.key().size() >= 4 &&
                 p.key().compare(p.key().size() - 4, 4, "bias") == 0) {
        p.value().zero_();
      }
    }
  }
  Tensor forward(const Tensor &idx) {
    int64_t t = idx.size(1);
    Tensor x = torch::embedding(wte, idx) + wpe.slice(0, 0, t);
    for (auto &blk : blocks) {
      x = blk->forward(x, mask);
    }
    return torch::linear(lnf(x), wte);
  }
};

// "Attention is all you need" base, post-LN, shared embedding.
struct EncLayer : torch::nn::Module {
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  int64_t heads;
  EncLayer(const Config &c) : heads(c.heads) {
    qkv = register_module("qkv", torch::nn::Linear(c.d, 3 * c.d));
    proj = register_module("proj", torch::nn::Linear(c.d, c.d));
    ln1 = register_module("ln1", layerNorm(c.d));
    fc1 = register_module("fc1", torch::nn::Linear(c.d, c.dff));
    fc2 = register_module("fc2", torch::nn::Linear(c.dff, c.d));
    ln2 = register_module("ln2", layerNorm(c.d));
  }
  Tensor forward(Tensor x) {
    auto p = qkv(x).chunk(3, -1);
    x = ln1(x + proj(attend(p[0], p[1], p[2], heads, Tensor())));
    return ln2(x + fc2(torch::relu(fc1(x))));
  }
};

struct DecLayer : torch::nn::Module {
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, xq{nullptr}, xkv{nullptr},
      xproj{nullptr}, fc1{nullptr}, fc2{nullptr};
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr}, ln3{nullptr};
  int64_t heads;
  DecLayer(const Config &c) : heads(c.heads) {
    qkv = register_module("qkv", torch::nn::Linear(c.d, 3 * c.d));
    proj = register_module("proj", torch::nn::Linear(c.d, c.d));
    ln1 = register_module("ln1", layerNorm(c.d));
    xq = register_module("xq", torch::nn::Linear(c.d, c.d));
    xkv = register_module("xkv", torch::nn::Linear(c.d, 2 * c.d));
    xproj = register_module("xproj", torch::nn::Linear(c.d, c.d));
    ln2 = register_module("ln2", layerNorm(c.d));
    fc1 = register_module("fc1", torch::nn::Linear(c.d, c.dff));
    fc2 = register_module("fc2", torch::nn::Linear(c.dff, c.d));
    ln3 = register_module("ln3", layerNorm(c.d));
  }
  Tensor forward(Tensor y, const Tensor &mem, const Tensor &mask) {
    auto p = qkv(y).chunk(3, -1);
    y = ln1(y + proj(attend(p[0], p[1], p[2], heads, mask)));
    auto kv = xkv(mem).chunk(2, -1);
    y = ln2(y + xproj(attend(xq(y), kv[0], kv[1], heads, Tensor())));
    return ln3(y + fc2(torch::relu(fc1(y))));
  }
};

struct EncDec : torch::nn::Module {
  Tensor emb, pe, mask;
  std::vector<std::shared_ptr<EncLayer>> enc;
  std::vector<std::shared_ptr<DecLayer>> dec;
  double scale;
  EncDec(const Config &c) : scale(std::sqrt(double(c.d))) {
    emb = register_parameter("emb", torch::empty({c.vocab, c.d}));
    for (int64_t i = 0; i < c.layers; ++i) {
      enc.push_back(register_module("enc" + std::to_string(i),
                                    std::make_shared<EncLayer>(c)));
    }
    for (int64_t i = 0; i < c.layers; ++i) {
      dec.push_back(register_module("dec" + std::to_string(i),
                                    std::make_shared<DecLayer>(c)));
    }
    Tensor pos = torch::arange(c.t, torch::kFloat).unsqueeze(1);
    Tensor div = torch::exp(torch::arange(0, c.d, 2, torch::kFloat) *
                            (-std::log(10000.0) / c.d));
    Tensor table = torch::zeros({c.t, c.d});
    table.slice(1, 0, c.d, 2).copy_(torch::sin(pos * div));
    table.slice(1, 1, c.d, 2).copy_(torch::cos(pos * div));
    pe = register_buffer("pe", table);
    mask = register_buffer("mask", causalMask(c.t));
    torch::NoGradGuard ng;
    for (auto &p : named_parameters()) {
      if (p.value().dim() == 2) {
        torch::nn::init::xavier_uniform_(p.value());
      } else if (p.key().size() >= 4 &&
                 p.key().compare(p.key().size() - 4, 4, "bias") == 0) {
        p.value().zero_();
      }
    }
  }
  Tensor embed(const Tensor &ids) {
    return torch::embedding(emb, ids) * scale + pe.slice(0, 0, ids.size(1));
  }
  Tensor forward(const Tensor &src, const Tensor &tgt) {
    Tensor x = embed(src);
    for (auto &l : enc) {
      x = l->forward(x);
    }
    Tensor y = embed(tgt);
    for (auto &l : dec) {
      y = l->forward(y, x, mask);
    }
    return torch::linear(y, emb);
  }
};

const Config kGptTiny{65, 128, 4, 4, 512, 128, 16};
const Config kGptSmall{4096, 384, 6, 6, 1536, 256, 8};
const Config kEncDec{8000, 512, 8, 6, 2048, 64, 8}; // S = T = 64

// Matmul FLOPs of one forward pass (BENCHMARKS.md; dense T x T attention).
double gptFlops(const Config &c) {
  double t = c.t, d = c.d;
  return c.b *
         (c.layers * (24 * t * d * d + 4 * t * t * d) + 2 * t * d * c.vocab);
}
// Encoder layer: QKV+out+FFN 24·S·d² + scores/AV 4·S²·d. Decoder layer:
// self-attn + cross Q/out + FFN 28·T·d², cross K|V 4·S·d², 4·T²·d + 4·T·S·d.
// Head 2·T·d·V. With S = T this gives 50.50 GFLOP for the doc's config.
double encdecFlops(const Config &c) {
  double s = c.t, t = c.t, d = c.d;
  double enc = 24 * s * d * d + 4 * s * s * d;
  double dec = 28 * t * d * d + 4 * s * d * d + 4 * t * t * d + 4 * t * s * d;
  return c.b * (c.layers * (enc + dec) + 2 * t * d * c.vocab);
}

struct Options {
  std::vector<std::string> models{"gpt-tiny", "gpt-small", "encdec"};
  std::vector<std::string> modes{"forward", "train"};
  int threads = 2, steps = 10;
  /// This machine's FMA peak for `threads` threads (fma_peak.h), measured
  /// once by the parent process and handed to each measurement.
  double peak = 0;
};

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) {
      out.push_back(item);
    }
  }
  return out;
}

// One measurement, run in a fresh process so that peak RSS is its own.
int measure(const std::string &model, const std::string &mode,
            const Options &o) {
  torch::set_num_threads(o.threads);
  torch::manual_seed(1234);
  bool encdec = model == "encdec";
  Config c = encdec ? kEncDec : model == "gpt-tiny" ? kGptTiny : kGptSmall;
  if (mode == "forward-b1") {
    c.b = 1;
  }
  std::shared_ptr<torch::nn::Module> net;
  std::shared_ptr<Gpt> gpt;
  std::shared_ptr<EncDec> ed;
  if (encdec) {
    net = ed = std::make_shared<EncDec>(c);
  } else {
    net = gpt = std::make_shared<Gpt>(c);
  }
  Tensor src = torch::randint(c.vocab, {c.b, c.t}, torch::kLong);
  Tensor seq = torch::randint(c.vocab, {c.b, c.t + 1}, torch::kLong);
  Tensor in = seq.slice(1, 0, c.t), target = seq.slice(1, 1).reshape({-1});
  auto loss = [&] {
    Tensor logits = encdec ? ed->forward(src, in) : gpt->forward(in);
    return F::cross_entropy(logits.view({-1, c.vocab}), target);
  };
  bool train = mode == "train";
  torch::optim::AdamW opt(net->parameters(), torch::optim::AdamWOptions(3e-4)
                                                 .betas({0.9, 0.999})
                                                 .eps(1e-8)
                                                 .weight_decay(0.01));
  net->train(train);
  std::vector<double> ms;
  double first = 0, last = 0; // loss of the first (warm-up) and last step
  double roundTripBefore = kiln::bench::measureCoreRoundTripNs();
  for (int i = 0; i < 3 + o.steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (train) {
      opt.zero_grad();
      Tensor l = loss();
      l.backward();
      opt.step();
      last = l.item<float>();
    } else {
      torch::NoGradGuard ng;
      last = loss().item<float>();
    }
    auto t1 = std::chrono::steady_clock::now();
    if (i == 0) {
      first = last;
    }
    if (i >= 3) {
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  double roundTripAfter = kiln::bench::measureCoreRoundTripNs();
  std::sort(ms.begin(), ms.end());
  double median = ms.size() % 2
                      ? ms[ms.size() / 2]
                      : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  double gflop =
      (encdec ? encdecFlops(c) : gptFlops(c)) * 1e-9 * (train ? 3 : 1);
  double gflops = gflop / (median * 1e-3);
  double peak = o.peak > 0 ? o.peak : kiln::bench::measureFmaPeak(o.threads);
  int64_t params = 0;
  for (auto &p : net->parameters()) {
    params += p.numel();
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("PARAMS %lld\n", (long long)params);
  std::printf("RESULT peer=libtorch model=%s mode=%s median_ms=%.2f "
              "min_ms=%.2f tokens_per_s=%.0f gflops=%.1f peak_pct=%.1f "
              "rss_mib=%.0f loss_first=%.4f loss_last=%.4f "
              "core_ns_before=%.0f core_ns_after=%.0f\n",
              model.c_str(), mode.c_str(), median, ms.front(),
              c.b * c.t / (median * 1e-3), gflops, 100 * gflops / peak,
              ru.ru_maxrss / 1024.0, first, last, roundTripBefore,
              roundTripAfter);
  return 0;
}

std::map<std::string, std::string> fields(const std::string &line) {
  std::map<std::string, std::string> kv;
  std::stringstream ss(line);
  for (std::string w; ss >> w;) {
    auto eq = w.find('=');
    if (eq != std::string::npos) {
      kv[w.substr(0, eq)] = w.substr(eq + 1);
    }
  }
  return kv;
}

// Runs `self --child model mode ...`; returns its RESULT line and params.
std::string runChild(const char *self, const std::string &model,
                     const std::string &mode, const Options &o,
                     std::string &params) {
  int fd[2];
  if (pipe(fd) != 0) {
    return "";
  }
  std::string th = std::to_string(o.threads), st = std::to_string(o.steps);
  std::string pk = std::to_string(o.peak);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    execl("/proc/self/exe", self, "--child", model.c_str(), mode.c_str(),
          "--threads", th.c_str(), "--steps", st.c_str(), "--peak", pk.c_str(),
          (char *)nullptr);
    _exit(127);
  }
  close(fd[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) > 0;) {
    out.append(buf, n);
  }
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  auto pp = out.find("PARAMS ");
  params = pp == std::string::npos
               ? "?"
               : out.substr(pp + 7, out.find('\n', pp) - pp - 7);
  auto pos = out.find("RESULT ");
  if (pos == std::string::npos || !WIFEXITED(status) || WEXITSTATUS(status)) {
    return "";
  }
  return out.substr(pos, out.find('\n', pos) - pos);
}

void printEnvironment(const Options &o) {
  torch::set_num_threads(o.threads);
  auto corename = (char *(*)())dlsym(RTLD_DEFAULT, "openblas_get_corename");
  auto parallel = (int (*)())dlsym(RTLD_DEFAULT, "openblas_get_parallel");
  const char *cap = std::getenv("ATEN_CPU_CAPABILITY");
  static const char *kPar[] = {"sequential", "pthreads", "openmp"};
  int par = parallel ? parallel() : -1;
  double load = 0;
  getloadavg(&load, 1);
  std::printf("libtorch %s, torch threads %d, OpenBLAS core %s (%s), "
              "ATEN_CPU_CAPABILITY=%s, %d timed steps after 3 warm-up, "
              "load average %.2f%s\n",
              TORCH_VERSION, torch::get_num_threads(),
              corename ? corename() : "not loaded",
              par >= 0 && par <= 2 ? kPar[par] : "?", cap ? cap : "(unset)",
              o.steps, load,
              load > 0.5 ? " (busy machine: timings will be noisy)" : "");
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string child;
  std::string childMode;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool more = i + 1 < argc;
    if (a == "--models" && more) {
      o.models = split(argv[++i]);
    } else if (a == "--modes" && more) {
      o.modes = split(argv[++i]);
    } else if (a == "--threads" && more) {
      o.threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--steps" && more) {
      o.steps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--peak" && more) {
      o.peak = std::atof(argv[++i]);
    } else if (a == "--child" && i + 2 < argc) {
      child = argv[++i];
      childMode = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: %s [--models gpt-tiny,gpt-small,encdec] "
                   "[--modes forward,forward-b1,train] [--threads N] "
                   "[--steps N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!child.empty()) {
    return measure(child, childMode, o);
  }
  if (o.peak <= 0) {
    o.peak = kiln::bench::measureFmaPeak(o.threads);
  }
  std::printf("measured FMA peak: %.1f GFLOP/s on %d threads\n", o.peak,
              o.threads);
  for (auto &m : o.models) {
    if (m != "gpt-tiny" && m != "gpt-small" && m != "encdec") {
      std::fprintf(stderr, "unknown model %s\n", m.c_str());
      return 2;
    }
  }
  for (auto &m : o.modes) {
    if (m != "forward" && m != "forward-b1" && m != "train") {
      std::fprintf(stderr, "unknown mode %s (forward, forward-b1, train)\n",
                   m.c_str());
      return 2;
    }
  }
  // forward-b1 is gpt-small's batch-1 row: with `forward`, or alone (as
  // kiln-bench takes it, so that run.sh can measure that row again).
  std::vector<std::pair<std::string, std::string>> runs;
  for (auto &m : o.models) {
    for (auto &mode : o.modes) {
      if (mode != "forward-b1") {
        runs.push_back({m, mode});
      }
    }
  }
  bool b1 = std::count(o.models.begin(), o.models.end(), "gpt-small") &&
            (std::count(o.modes.begin(), o.modes.end(), "forward") ||
             std::count(o.modes.begin(), o.modes.end(), "forward-b1"));
  if (b1) {
    runs.push_back({"gpt-small", "forward-b1"});
  }
  printEnvironment(o);
  std::printf("%-10s %-10s %9s %9s %9s %8s %6s %8s %10s %s\n", "model", "mode",
              "median_ms", "min_ms", "tokens/s", "GFLOP/s", "peak%", "RSS_MiB",
              "params", "loss first -> last");
  std::fflush(stdout);
  std::vector<std::string> lines;
  int failed = 0;
  for (auto &r : runs) {
    std::string params;
    std::string line = runChild(argv[0], r.first, r.second, o, params);
    if (line.empty()) {
      std::printf("%-10s %-10s FAILED\n", r.first.c_str(), r.second.c_str());
      ++failed;
    } else {
      auto f = fields(line);
      std::printf("%-10s %-10s %9s %9s %9s %8s %6s %8s %10s %s -> %s\n",
                  r.first.c_str(), r.second.c_str(), f["median_ms"].c_str(),
                  f["min_ms"].c_str(), f["tokens_per_s"].c_str(),
                  f["gflops"].c_str(), f["peak_pct"].c_str(),
                  f["rss_mib"].c_str(), params.c_str(), f["loss_first"].c_str(),
                  f["loss_last"].c_str());
      lines.push_back(line);
    }
    std::fflush(stdout);
  }
  for (auto &l : lines) {
    std::printf("%s\n", l.c_str());
  }
  return failed ? 1 : 0;
}
