// An installed Kiln exports Kiln::MPI where it was built with Open MPI: a
// user's program links it and sums over the processes mpirun starts; run on
// its own it is a world of one, without mpirun.
// REQUIRES: mpi
// RUN: rm -rf %t && mkdir -p %t
// RUN: cmake --install %kiln_obj --prefix %t/prefix > %t/install.log
// RUN: cmake -S %S/mpi-project -B %t/build -G Ninja -DCMAKE_C_COMPILER=%clang -DCMAKE_CXX_COMPILER=%clangxx "-DCMAKE_CXX_FLAGS=%kiln_sanitize" -DCMAKE_PREFIX_PATH=%t/prefix > %t/configure.log
// RUN: cmake --build %t/build > %t/build.log
// RUN: %mpirun -np 3 %t/build/mpi-user | FileCheck %s
// RUN: %t/build/mpi-user | FileCheck %s --check-prefix=ALONE

// CHECK-DAG: rank 0 of 3: sum 6
// CHECK-DAG: rank 1 of 3: sum 6
// CHECK-DAG: rank 2 of 3: sum 6
// ALONE: rank 0 of 1: sum 1
