// dvm on a host engine's job system: the engine owns its worker threads and
// hands dvm a parallel loop (dvm::set_parallel_for); dvm then never starts
// threads of its own. The results are bit-identical to dvm's own threads,
// which the program checks, and it prints how many tasks the host ran.
//
//   job_system [workers]     (default 3; exit status 0 when the checks pass)
#include <dvm/dvm.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace {

// A minimal engine job system: a fixed pool of workers and a shared queue of
// index ranges; parallel_for blocks until its tasks are done, and the calling
// thread works on them too.
class JobSystem {
 public:
  explicit JobSystem(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
  }
  ~JobSystem() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  int workers() const { return static_cast<int>(threads_.size()) + 1; }
  int64_t tasks_run() const { return tasks_run_.load(); }

  // dvm::ParallelForFn: runs run(ctx, t) for t in [0, tasks).
  static void parallel_for(void* self, int64_t tasks, dvm::TaskFn run, void* ctx) {
    static_cast<JobSystem*>(self)->run_all(tasks, run, ctx);
  }

 private:
  struct Batch {
    int64_t tasks;
    dvm::TaskFn run;
    void* ctx;
    std::atomic<int64_t> next{0}, done{0};
    std::atomic<int> users{0};  // workers inside drain(): the batch lives until none is
  };

  void run_all(int64_t tasks, dvm::TaskFn run, void* ctx) {
    Batch b{tasks, run, ctx};
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch_ = &b;
    }
    cv_.notify_all();
    drain(b);
    // Wait for the tasks other workers took, then for the workers to leave.
    while (b.done.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch_ = nullptr;  // no worker joins b from here on
    }
    while (b.users.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }

  void drain(Batch& b) {
    for (int64_t t; (t = b.next.fetch_add(1)) < b.tasks;) {
      b.run(b.ctx, t);
      tasks_run_.fetch_add(1);
      b.done.fetch_add(1, std::memory_order_release);
    }
  }

  void work() {
    for (;;) {
      Batch* b = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (batch_ && batch_->next.load() < batch_->tasks); });
        if (stop_) return;
        b = batch_;
        b->users.fetch_add(1);  // under the lock, while batch_ still points at b
      }
      drain(*b);
      b->users.fetch_sub(1, std::memory_order_release);
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  Batch* batch_ = nullptr;
  bool stop_ = false;
  std::atomic<int64_t> tasks_run_{0};
};

std::vector<float> workload(const std::vector<float>& x, const std::vector<float>& w) {
  using dvm::Tensor;
  const int64_t rows = 512, cols = 2048;
  Tensor a = Tensor::from_blob(x.data(), {rows, cols});
  Tensor b = Tensor::from_blob(w.data(), {cols, 256});
  Tensor y = dvm::softmax(dvm::gelu(a) * 0.5f, -1);
  Tensor z = dvm::relu(dvm::matmul(y, b)) + 1.0f;
  std::vector<float> out = z.to_vector();
  const std::vector<float> s = (a * a).sum(0).to_vector();  // a column reduction
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int extra = argc > 1 ? std::atoi(argv[1]) : 3;
  std::vector<float> x(512 * 2048), w(2048 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 2654435761u % 2001) - 1000) * 1e-3f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 40503u % 2001) - 1000) * 1e-3f;

  dvm::set_num_threads(4);  // dvm's own threads first: the reference bits
  const std::vector<float> own = workload(x, w);

  JobSystem jobs(extra);
  dvm::set_parallel_for(&JobSystem::parallel_for, &jobs, jobs.workers());
  const std::vector<float> hosted = workload(x, w);
  dvm::set_parallel_for(nullptr, nullptr, 1);

  const bool same = own.size() == hosted.size() && std::memcmp(own.data(), hosted.data(), own.size() * 4) == 0;
  std::printf("job_system: %d host workers ran %lld dvm tasks; results %s dvm's own threads' bit for bit\n",
              jobs.workers(), static_cast<long long>(jobs.tasks_run()), same ? "match" : "DO NOT match");
  if (!same || jobs.tasks_run() == 0) return 1;
  return 0;
}
