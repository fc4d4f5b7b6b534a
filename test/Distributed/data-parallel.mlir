// Data-parallel training on Open MPI: np=2 and np=3 against one process on
// the concatenated batches (the ranks keep different numbers of tokens),
// bitwise identical parameters across ranks, exact resume, a failing rank
// ending the job, and the training examples under mpirun.
// REQUIRES: mpi
// RUN: rm -rf %t && mkdir -p %t
// The np=2 run is also the uninterrupted run the resumed one must reproduce.
// RUN: %mpirun -np 2 kiln-data-parallel-check --compare --steps 6 > %t/full.out
// RUN: FileCheck %s --check-prefix=NP2 < %t/full.out
// Gradients summed in buckets of 1000 floats (tensors cut between buckets):
// RUN: %mpirun -np 3 kiln-data-parallel-check --compare --bucket-floats 1000 | FileCheck %s --check-prefix=NP3

// Resume at np=2 reproduces the uninterrupted np=2 run bit for bit.
// RUN: %mpirun -np 2 kiln-data-parallel-check --steps 3 --checkpoint %t/r.safetensors > %t/first.out
// RUN: %mpirun -np 2 kiln-data-parallel-check --steps 6 --checkpoint %t/r.safetensors --resume > %t/resumed.out
// RUN: FileCheck %s --check-prefix=RESUME < %t/resumed.out
// RUN: grep -a hash %t/full.out > %t/full.hash
// RUN: grep -a hash %t/resumed.out > %t/resumed.hash
// RUN: diff %t/full.hash %t/resumed.hash
// Another world size continues, and says what that means.
// RUN: %mpirun -np 3 kiln-data-parallel-check --steps 7 --checkpoint %t/r.safetensors --resume | FileCheck %s --check-prefix=WORLD

// A rank that throws at step 3 ends the whole job with a non-zero status
// within seconds (no hang: `timeout` would give 124), naming the rank; the
// checkpoint of step 2 stays and loads.
// RUN: timeout 60 %mpirun -np 2 kiln-data-parallel-check --steps 5 --checkpoint %t/f.safetensors --checkpoint-every 1 --fail-rank 1 --fail-step 3 > %t/fail.out 2>&1; echo "exit $?" >> %t/fail.out
// RUN: FileCheck %s --check-prefix=FAIL < %t/fail.out
// RUN: kiln-data-parallel-check --load %t/f.safetensors | FileCheck %s --check-prefix=LOAD
// A rank that dies (SIGKILL) ends the job too.
// RUN: timeout 60 %mpirun -np 2 kiln-data-parallel-check --steps 5 --fail-rank 1 --fail-step 3 --kill > %t/kill.out 2>&1; echo "exit $?" >> %t/kill.out
// RUN: FileCheck %s --check-prefix=KILL < %t/kill.out
// A rank that stops (SIGSTOP: a hung file system) leaves the others in a
// collective until its deadline, which ends the job naming the rank.
// RUN: env KILN_COLLECTIVE_TIMEOUT=3 timeout 60 %mpirun -x KILN_COLLECTIVE_TIMEOUT -np 2 kiln-data-parallel-check --steps 5 --fail-rank 1 --fail-step 3 --stop > %t/stop.out 2>&1; echo "exit $?" >> %t/stop.out
// RUN: FileCheck %s --check-prefix=STOP < %t/stop.out
// Ranks whose models differ (one more vocabulary entry on rank 1) stop
// before the first copy of the parameters, naming the rank.
// RUN: timeout 60 %mpirun -np 2 kiln-data-parallel-check --other-model-rank 1 > %t/other.out 2>&1; echo "exit $?" >> %t/other.out
// RUN: FileCheck %s --check-prefix=OTHER < %t/other.out

// The examples train under mpirun unchanged.
// RUN: %mpirun -np 2 kiln-example-shakespeare --steps 6 --batch 4 --context 16 --d-model 32 --layers 1 --heads 2 --warmup 2 --eval-every 3 --eval-batches 2 --sample 20 --checkpoint %t/s.safetensors | FileCheck %s --check-prefix=SHAKESPEARE
// RUN: %mpirun -np 2 kiln-example-translate --epochs 1 --batch 128 --d-model 32 --layers 1 --heads 2 --d-ff 64 --warmup 20 --show 1 | FileCheck %s --check-prefix=TRANSLATE

// NP2: data-parallel: 2 processes, each on its share of every batch
// NP2: loss 4
// NP2: parameters and state of 2 ranks bitwise identical
// NP2: compare with one process: {{.*}}: ok
// NP3: data-parallel: 3 processes
// NP3: parameters and state of 3 ranks bitwise identical
// NP3: compare with one process: {{.*}}: ok

// RESUME: resumed from {{.*}}r.safetensors at step 3
// RESUME-NOT: written by
// RESUME: loss 4
// RESUME: bitwise identical
// WORLD: resumed from {{.*}} at step 6
// WORLD: the checkpoint was written by 2 process(es), this run has 3
// WORLD: loss 7
// WORLD: parameters and state of 3 ranks bitwise identical

// FAIL: error: rank 1 of 2: injected failure at step 3
// FAIL: exit 1
// LOAD: at step 2, written by 2 process(es)
// KILL: rank 1 {{.*}}exited on signal 9
// KILL-NOT: exit 0
// KILL-NOT: exit 124
// KILL: exit {{[1-9][0-9]*}}
// STOP: error: rank 0 of 2: an all-reduce waited 3 s for the other processes (one stopped, or hangs): ending the job
// STOP-NOT: exit 124
// STOP: exit {{[1-9][0-9]*}}
// OTHER: the processes do not hold the same model: the parameters of rank 1 differ from rank 0's in names, dtypes or shapes
// OTHER: exit {{[1-9][0-9]*}}

// SHAKESPEARE: data-parallel: 2 processes
// SHAKESPEARE: step 3: validation loss
// SHAKESPEARE: step 6/6 | loss
// SHAKESPEARE: --- sample
// TRANSLATE: data-parallel: 2 processes
// TRANSLATE: held-out token accuracy
