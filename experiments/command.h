// vit_ddp's command: runs ddplab experiments, as the binary does with its arguments.
//
//   bazel run //experiments:vit_ddp                        # the default suite
//   bazel run //experiments:vit_ddp -- --experiment=experiments/naive_ddp.textproto
//   bazel run //experiments:vit_ddp -- --experiment=FILE --nproc_per_node=4
//   bazel run //experiments:vit_ddp -- --print_experiments  # what would run; runs nothing
//
// It loads and validates the experiment file, configures each experiment's plugins,
// plans the runs and checks them (processes for the machine, memory for the model, the
// output directory free of other jobs) before any starts, prints the device report and
// runs them (experiments/plan.h says which process runs what; suite_runner.h how). Under
// torchrun, srun or mpirun every process of the job runs the suite together and rank 0
// writes the results and the report.
//
// The binary (vit_ddp_main.cc) is this function. Tests call it in their own process too,
// for what it answers without running anything (help, refusals, plans): a vit_ddp
// process costs LibTorch's start, about 0.8 s of a core, and twice that under the
// sanitizers.
//
//   absl::FlagSaver saved;  // it sets vit_ddp's flags
//   int code = ddplab::RunVitDdp(argc, argv);  // 0, 1 (a run failed), 2 (refused), 128+N
#ifndef DDPLAB_EXPERIMENTS_COMMAND_H_
#define DDPLAB_EXPERIMENTS_COMMAND_H_

namespace ddplab {

// What vit_ddp's main does with its arguments (argv[0] is the program, whose runfiles
// hold the plugins and experiment files built with it); its exit code. It writes to
// std::cout and std::cerr.
int RunVitDdp(int argc, char** argv);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_COMMAND_H_
