//===- DifferentialElementwiseTest.cpp - (being written) --------------------------===//
#include "Differential.h"
