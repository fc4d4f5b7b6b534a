//===- DifferentialPlanTest.cpp - The sizes the differential harness runs -===//
//
// Differential.h compiles the static variant once per size and sweeps the
// symbols together to keep those compilations few. These tests pin down
// what that must not lose: every value of every symbol is compiled static
// (the kept-static symbols too, in the same diagonal), every dynamic symbol
// is swept on its own through the dynamic compilation, and a combination
// the case does not admit is taken apart. The expected sizes are written out by
// hand.
//
//===----------------------------------------------------------------------===//

#include "Differential.h"

using namespace kiln;
using diff::Case;
using diff::Sizes;

namespace {

Case threeSymbols() {
  Case c;
  c.name = "plan";
  c.operands.resize(2);
  c.operands[0].dims = {"A", "B"};
  c.operands[1].dims = {"B", "W"};
  c.results = {{"A", "W"}};
  c.base = {{"A", 2}, {"B", 17}, {"W", 4}};
  c.sweep = {{"A", {1, 3, 5}}, {"B", {16, 33}}, {"W", {4, 8, 12}}};
  c.alwaysStatic = {"W"};
  return c;
}

TEST(DifferentialPlan, SweepsTogetherAndEachValueOnce) {
  diff::Plan p = diff::plan(threeSymbols());
  // Each dynamic symbol on its own through one compilation.
  EXPECT_EQ(p.dynamicSweep, (std::vector<Sizes>{
                                {{"A", 2}, {"B", 17}, {"W", 4}},
                                {{"A", 1}, {"B", 17}, {"W", 4}},
                                {{"A", 3}, {"B", 17}, {"W", 4}},
                                {{"A", 5}, {"B", 17}, {"W", 4}},
                                {{"A", 2}, {"B", 16}, {"W", 4}},
                                {{"A", 2}, {"B", 33}, {"W", 4}},
                            }));
  // The kept-static symbol is not compiled dynamic at its other values...
  EXPECT_TRUE(p.staticSymbolSteps.empty());
  // ... but static, in the one diagonal: A ascending, B descending and back
  // to its base past its sweep's end, W (kept static, third) ascending.
  EXPECT_EQ(p.staticShapes, (std::vector<Sizes>{
                                {{"A", 2}, {"B", 17}, {"W", 4}},
                                {{"A", 1}, {"B", 33}, {"W", 4}},
                                {{"A", 3}, {"B", 16}, {"W", 8}},
                                {{"A", 5}, {"B", 17}, {"W", 12}},
                            }));
}

TEST(DifferentialPlan, ARefusedCombinationIsTakenApart) {
  Case c = threeSymbols();
  c.admits = [](const Sizes &s) { return s.at("A") * 10 <= s.at("B"); };
  diff::Plan p = diff::plan(c);
  // Taken apart: a step per symbol it changes, the others at their base.
  EXPECT_EQ(p.staticShapes, (std::vector<Sizes>{
                                {{"A", 2}, {"B", 17}, {"W", 4}},
                                {{"A", 1}, {"B", 33}, {"W", 4}},
                                {{"A", 3}, {"B", 17}, {"W", 4}},
                                {{"A", 2}, {"B", 16}, {"W", 4}},
                                {{"A", 2}, {"B", 17}, {"W", 8}},
                                {{"A", 5}, {"B", 17}, {"W", 4}},
                                {{"A", 2}, {"B", 17}, {"W", 12}},
                            }));
}

TEST(DifferentialPlan, NoStaticShapesWhenEverySymbolIsKeptStatic) {
  Case c = threeSymbols();
  c.alwaysStatic = {"A", "B", "W"};
  diff::Plan p = diff::plan(c);
  EXPECT_TRUE(p.staticShapes.empty());
  EXPECT_EQ(p.dynamicSweep,
            (std::vector<Sizes>{{{"A", 2}, {"B", 17}, {"W", 4}}}));
  EXPECT_EQ(p.staticSymbolSteps.size(), 3u); // the longest sweep, 3 values
}

} // namespace
