// The Llama architecture (grouped-query attention, rotary positions, SwiGLU)
// trains data-parallel: np=2 against one process on the same global
// batches, with bitwise identical parameters across the ranks.
// REQUIRES: mpi
// RUN: %mpirun -np 2 kiln-data-parallel-check --llama --compare --steps 4 | FileCheck %s

// CHECK: data-parallel: 2 processes, each on its share of every batch
// CHECK: loss 4
// CHECK: parameters and state of 2 ranks bitwise identical
// CHECK: compare with one process: {{.*}}: ok
