// What a worker process of vit_ddp does: the run its launcher hands over in the
// environment (one run, then it ends), or the runs its pool hands over one after another
// (core/launch/worker_pool.h, Note [Persistent workers]). Rank 0 prints each run's
// summary and writes its result.
//
//   if (const char* task = std::getenv(ddplab::kWorkerTaskVariable)) return ddplab::RunWorkerTask(in, host, task);
//   if (channel) return ddplab::ServeTasks(in, host, *channel);
#ifndef DDPLAB_EXPERIMENTS_WORKER_H_
#define DDPLAB_EXPERIMENTS_WORKER_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/launch/distributed.h"
#include "core/launch/worker_pool.h"
#include "core/plugin/plugin_host.h"
#include "core/run/invocation.h"

namespace ddplab {

// Trains the run `text` holds (a v1::WorkerTask in text format) as one worker of
// ddplab's launcher; the process's exit code.
int RunWorkerTask(const Invocation& in, PluginHost& host, const std::string& text);

// Trains each run its pool hands over on `channel`, each meeting the other ranks under a
// store prefix of its own; 0 once the pool closes the channel, else the exit code of the
// first run that failed (the pool then ends every worker).
int ServeTasks(const Invocation& in, PluginHost& host, TaskChannel& channel);

}  // namespace ddplab

#endif  // DDPLAB_EXPERIMENTS_WORKER_H_
