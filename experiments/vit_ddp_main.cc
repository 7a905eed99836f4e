// vit_ddp: runs ddplab experiments (experiments/command.h).
#include "experiments/command.h"

int main(int argc, char** argv) { return ddplab::RunVitDdp(argc, argv); }
