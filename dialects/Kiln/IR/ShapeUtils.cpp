//===- ShapeUtils.cpp - Shape arithmetic ----------------------------------===//
//
// Broadcasting, reshape and slice resolution with dynamic sizes.
//
//===----------------------------------------------------------------------===//

#include "dialects/Kiln/IR/ShapeUtils.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir::kiln;

static bool isDynamic(int64_t size) { return size == shape::kDynamic; }

bool shape::compatible(int64_t a, int64_t b) {
  return isDynamic(a) || isDynamic(b) || a == b;
}

int64_t shape::merge(int64_t a, int64_t b) { return isDynamic(a) ? b : a; }

std::optional<int64_t> shape::normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

std::string shape::format(llvm::ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t size) {
    if (isDynamic(size)) {
      os << "?";
    } else {
      os << size;
    }
  });
  os << "]";
  return text;
}

std::string shape::broadcast(llvm::ArrayRef<int64_t> a,
                             llvm::ArrayRef<int64_t> b,
                             llvm::SmallVectorImpl<int64_t> &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  std::string error;
  for (size_t i = 0; i < rank; ++i) {
    // Align at the last dimension; missing leading dimensions act as 1.
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x == 1) {
      result[i] = y;
    } else if (y == 1) {
      result[i] = x;
    } else if (isDynamic(x) || isDynamic(y)) {
      // Either may be 1 at run time; the static one wins if there is one.
      result[i] = isDynamic(x) ? y : x;
    } else if (x == y) {
      result[i] = x;
    } else {
      result[i] = kDynamic;
      if (error.empty()) {
        error = "shapes " + format(a) + " and " + format(b) +
                " do not broadcast: size " + std::to_string(x) + " vs " +
                std::to_string(y) + " at dimension " + std::to_string(i) +
                " of the result";
      }
    }
  }
  return error;
}

std::string shape::reshape(llvm::ArrayRef<int64_t> input,
                           llvm::ArrayRef<int64_t> spec,
                           llvm::SmallVectorImpl<int64_t> &result) {
  result.assign(spec.size(), kDynamic);
  std::optional<size_t> inferred;
  for (auto [i, size] : llvm::enumerate(spec)) {
    if (size == -1) {
      if (inferred) {
        return "at most one size may be -1, found -1 at indices " +
               std::to_string(*inferred) + " and " + std::to_string(i);
      }
      inferred = i;
    } else if (size == 0) {
      if (i >= input.size()) {
        return "size 0 at index " + std::to_string(i) +
               " keeps an input dimension, but the input has rank " +
               std::to_string(input.size());
      }
      result[i] = input[i];
    } else if (size < 0) {
      return "sizes must be positive, 0 (keep) or -1 (infer), found " +
             std::to_string(size) + " at index " + std::to_string(i);
    } else {
      result[i] = size;
    }
  }

  // A kept size is the same on both sides, even when dynamic: cancel it and
  // compare the element counts of what is left.
  bool overflows = false;
  auto product = [&](llvm::ArrayRef<int64_t> shape,
                     bool isResult) -> std::optional<int64_t> {
    int64_t count = 1;
    for (auto [i, size] : llvm::enumerate(shape)) {
      bool kept = i < spec.size() && spec[i] == 0;
      if (kept || (isResult && inferred && i == *inferred)) {
        continue;
      }
      if (isDynamic(size)) {
        return std::nullopt;
      }
      if (__builtin_mul_overflow(count, size, &count)) {
        overflows = true;
        return std::nullopt;
      }
    }
    return count;
  };
  std::optional<int64_t> in = product(input, false);
  std::optional<int64_t> out = product(result, true);
  if (overflows) {
    return "the element count of " + format(input) + " or " + format(result) +
           " overflows 64 bits";
  }
  if (!in || !out) {
    return {}; // Known only at run time.
  }
  if (inferred) {
    if (*out == 0 || *in % *out != 0) {
      return "cannot infer the size at index " + std::to_string(*inferred) +
             ": " + std::to_string(*in) + " elements of " + format(input) +
             " are not a multiple of " + std::to_string(*out);
    }
    result[*inferred] = *in / *out;
    return {};
  }
  if (*in != *out) {
    return "cannot reshape " + format(input) + " into " + format(result) +
           ": the element counts differ (" + std::to_string(*in) + " vs " +
           std::to_string(*out) + " outside the kept dimensions)";
  }
  return {};
}

std::string shape::slice(int64_t size, int64_t start,
                         std::optional<int64_t> end, int64_t &length) {
  length = kDynamic;
  auto bounds = [&] {
    return "[" + std::to_string(start) + ":" +
           (end ? std::to_string(*end) : std::string()) + "]";
  };
  if (!isDynamic(size)) {
    int64_t first = start < 0 ? start + size : start;
    int64_t last = !end ? size : (*end < 0 ? *end + size : *end);
    if (first < 0 || last > size || first >= last) {
      return "slice " + bounds() +
             " selects nothing valid in a dimension of size " +
             std::to_string(size);
    }
    length = last - first;
    return {};
  }
  // Dynamic size: the length is known when both bounds count from the same
  // end of the dimension.
  bool sameSide = end && ((start >= 0) == (*end >= 0));
  if (sameSide || (start < 0 && !end)) {
    int64_t last = end ? *end : 0;
    if (start >= last) {
      return "slice " + bounds() + " is empty";
    }
    length = last - start;
  }
  return {};
}
