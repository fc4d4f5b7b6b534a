//===- DifferentialBlocksTest.cpp - (being written) --------------------------===//
#include "Differential.h"
