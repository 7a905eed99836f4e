// A thread of a communication hook's own that runs the buckets handed to it, one after
// another in the order given (the same on every rank, so that the collectives match),
// while autograd's thread goes on with backward. Header only: plugins compile it.
//
//   class MyHook : public ddplab::CommHook {
//     MyHook() { worker_.emplace([this](Task& t) { Reduce(t); }); }   // last member
//     Future Run(GradBucket& b) override { worker_->Push(Task{b, future}); return future; }
//     std::optional<ddplab::HookWorker<Task>> worker_;
//   };
#ifndef DDPLAB_CORE_ENGINE_HOOK_WORKER_H_
#define DDPLAB_CORE_ENGINE_HOOK_WORKER_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace ddplab {

template <typename Task>
class HookWorker {
 public:
  // Starts the thread, which calls `run` on each task pushed. Construct it last (it runs
  // the hook's members from the start), e.g. as a std::optional emplaced in the body.
  explicit HookWorker(std::function<void(Task&)> run) : run_(std::move(run)), thread_([this] { Loop(); }) {}
  // Runs what was handed over, then stops: the engine waits for every bucket anyway.
  ~HookWorker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  HookWorker(const HookWorker&) = delete;
  HookWorker& operator=(const HookWorker&) = delete;

  void Push(Task task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      run_(task);
    }
  }

  std::function<void(Task&)> run_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything it uses exists
};

}  // namespace ddplab

#endif  // DDPLAB_CORE_ENGINE_HOOK_WORKER_H_
