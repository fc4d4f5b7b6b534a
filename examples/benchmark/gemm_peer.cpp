//===- gemm_peer.cpp - BLAS libraries on the benchmark contractions -------===//
//
// The library side of the GEMM benchmark (run-gemm.sh builds it once per
// library found: OpenBLAS, BLIS or MKL through CBLAS, oneDNN through
// dnnl_sgemm). Same shapes (gemm_shapes.h), same row-major layouts and the
// same median as kiln_gemm.cpp; a batched shape is a loop of products, as
// libtorch runs it. Threads are the library's (OMP_NUM_THREADS,
// BLIS_NUM_THREADS, MKL_NUM_THREADS). Prints `GEMM peer=<PEER_NAME> ...`
// lines.
//
//===----------------------------------------------------------------------===//

#include "gemm_shapes.h"

#if defined(PEER_DNNL)
#include <oneapi/dnnl/dnnl.h>
#elif defined(PEER_MKL)
#include <mkl_cblas.h>
#else
#include <cblas.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#ifndef PEER_NAME
#define PEER_NAME "blas"
#endif

using kiln::bench::GemmShape;

static void gemm(const GemmShape &s, const float *a, const float *b, float *c) {
  bool transA = std::strcmp(s.layout, "TN") == 0;
  bool transB = std::strcmp(s.layout, "NT") == 0;
  long lda = transA ? s.m : s.k, ldb = transB ? s.k : s.n;
  for (long i = 0; i < s.batch; ++i) {
    const float *ai = a + i * s.m * s.k, *bi = b + i * s.k * s.n;
    float *ci = c + i * s.m * s.n;
#ifdef PEER_DNNL
    dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', s.m, s.n, s.k, 1.0f, ai,
               lda, bi, ldb, 0.0f, ci, s.n);
#else
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, s.m, s.n, s.k, 1.0f, ai,
                lda, bi, ldb, 0.0f, ci, s.n);
#endif
  }
}

int main(int argc, char **argv) {
  for (const GemmShape &s : kiln::bench::kGemmShapes) {
    if (argc > 1 && std::strcmp(argv[1], s.name) != 0) {
      continue;
    }
    std::vector<float> a(s.batch * s.m * s.k, 0.5f),
        b(s.batch * s.k * s.n, 0.25f);
    std::vector<float> c(s.batch * s.m * s.n);
    double flop = 2.0 * s.m * s.n * s.k * s.batch;
    int reps = std::max(5, int(4e9 / flop));
    std::vector<double> seconds;
    for (int r = 0; r < reps + 2; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      gemm(s, a.data(), b.data(), c.data());
      auto t1 = std::chrono::steady_clock::now();
      if (r >= 2) {
        seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
      }
    }
    if (c[0] != 0.125f * s.k) {
      std::fprintf(stderr, "%s: %s: wrong result %g\n", PEER_NAME, s.name,
                   c[0]);
      return 1;
    }
    std::sort(seconds.begin(), seconds.end());
    double median = seconds[seconds.size() / 2];
    std::printf("GEMM peer=%s shape=\"%s\" ms=%.4f gflops=%.2f\n", PEER_NAME,
                s.name, median * 1e3, flop / median * 1e-9);
  }
  return 0;
}
