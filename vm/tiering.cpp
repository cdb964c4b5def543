// Tiering: thresholds, background compiles, publication.
#include "vm/tiering.h"

#include <chrono>
#include <cstdio>
#include <mutex>

#include <condition_variable>
#include <deque>
#include <functional>
#include <thread>
#include <unordered_map>

#include "vm/log.h"
#include "vm/profile.h"

namespace dvm::vm {
namespace {

std::atomic<TierMode> g_mode{TierMode::Auto};
std::atomic<int64_t> g_threshold{4};

// One background compile thread, started on first use. It blocks on a
// condition variable when idle (no spinning), and does not take a TBB worker
// from the launches (on a 2-core machine TBB has a single worker to share).
//
// With a host executor (set_compile_executor), jobs go to the host instead;
// `pending_` counts them too until the host runs them.
class Compiler {
 public:
  void submit(std::function<void()> job) {
    std::unique_lock<std::mutex> lock(mu_);
    ++pending_;
    if (host_fn_) {
      const CompileExecutorFn fn = host_fn_;
      void* host = host_;
      lock.unlock();
      auto* boxed = new HostJob{this, std::move(job)};
      fn(host, &HostJob::run, boxed);
      return;
    }
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    queue_.push_back(std::move(job));
    cv_.notify_all();
  }
  void set_executor(CompileExecutorFn fn, void* host) {
    std::lock_guard<std::mutex> lock(mu_);
    host_fn_ = fn;
    host_ = host;
  }
  // A wait from inside a compile (a log callback of the compile's messages)
  // does not block: the compiles it would wait for include its own, and the
  // queued ones behind it run on the same thread.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (t_jobs_running > 0) return;
    done_cv_.wait(lock, [&] { return pending_ == 0; });
  }
  bool wait_for(std::chrono::nanoseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (t_jobs_running > 0) return false;  // its own compile is not done
    return done_cv_.wait_for(lock, timeout, [&] { return pending_ == 0; });
  }
  // At exit: compiles still queued are dropped (nobody will run their
  // kernels); only the one in flight is waited for.
  ~Compiler() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      pending_ -= static_cast<int64_t>(queue_.size());
      queue_.clear();
      cv_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  // One compile handed to the host: run() does it once and frees it.
  struct HostJob {
    Compiler* owner;
    std::function<void()> fn;
    static void run(void* p) {
      auto* j = static_cast<HostJob*>(p);
      run_job(j->fn);
      Compiler* c = j->owner;
      delete j;
      c->finish_one();
    }
  };
  // Compiles running on this thread (one, or more where a host's job
  // system runs one inside another).
  static inline thread_local int t_jobs_running = 0;
  static void run_job(const std::function<void()>& job) {
    struct Running {
      Running() { ++t_jobs_running; }
      ~Running() { --t_jobs_running; }
    } running;
    job();  // compile_now catches what a backend throws
  }
  void finish_one() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
  void loop() {
    profile::set_thread_name("dvm jit compiler");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping with nothing left
      std::function<void()> job = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      run_job(job);
      lock.lock();
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::function<void()>> queue_;
  int64_t pending_ = 0;
  bool stop_ = false;
  CompileExecutorFn host_fn_ = nullptr;
  void* host_ = nullptr;
  std::thread thread_;
};

Compiler& compiler() {
  static Compiler c;
  return c;
}

void compile_now(const Kernel& k, const Backend& b, BackendSlot& slot) {
  auto t0 = std::chrono::steady_clock::now();
  std::string reason;
  std::unique_ptr<CompiledKernel> code;
  try {
    if (!b.supports || b.supports(k, &reason)) code = b.compile(k, &reason);
  } catch (const std::exception& e) {
    reason = std::string(b.name) + " threw: " + e.what();
  }
  slot.compile_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  if (profile::on()) [[unlikely]] {
    const int64_t begin = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    profile::Event e("jit compile", "jit", begin, begin + slot.compile_ns);
    e.hash("hash", k.hash()).s("form", form_name(k.form())).s("backend", b.name).b("ok", code != nullptr);
    e.f("compile_us", static_cast<double>(slot.compile_ns) / 1e3);
    if (!code) e.text_arg("reason", reason);
    profile::emit(e);
  }
  if (code) {
    slot.code = std::move(code);
    tier_stats().compiles.fetch_add(1, std::memory_order_relaxed);
    slot.state.store(BackendSlot::Ready, std::memory_order_release);
  } else {
    slot.failure = reason.empty() ? std::string(b.name) + " declined without a reason" : reason;
    if (log::wanted(LogLevel::Info)) {
      char hash[24];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(k.hash()));
      log::write(LogLevel::Info, std::string("dvm: kernel ") + hash + " (" + form_name(k.form()) + ") stays on " +
                                     "the interpreter: " + b.name + " declined it: " + slot.failure);
    }
    tier_stats().failures.fetch_add(1, std::memory_order_relaxed);
    slot.state.store(BackendSlot::Failed, std::memory_order_release);
  }
}

// The innermost WarmUpScope of this thread, if any.
thread_local WarmUpScope* t_warm_up = nullptr;

}  // namespace

WarmUpScope::WarmUpScope() : prev_(t_warm_up) { t_warm_up = this; }
WarmUpScope::~WarmUpScope() { t_warm_up = prev_; }

void WarmUpScope::note(const Kernel& k, const BackendSlot* slot) {
  auto [it, fresh] = seen_.try_emplace(k.hash());
  if (!fresh) return;  // and every enclosing scope has it too
  it->second.kernel = k.shared_from_this();
  it->second.slot = slot;
  it->second.was_ready = slot && slot->state.load(std::memory_order_acquire) == BackendSlot::Ready;
  if (prev_) prev_->note(k, slot);  // a nested warm_up's frame is the enclosing one's too
}

WarmUpCounts WarmUpScope::counts() const {
  WarmUpCounts c;
  c.kernels = static_cast<int64_t>(seen_.size());
  for (const auto& [hash, seen] : seen_) {
    if (!seen.slot) continue;
    const uint8_t state = seen.slot->state.load(std::memory_order_acquire);
    if (state == BackendSlot::Ready && !seen.was_ready) ++c.compiled;
    if (state == BackendSlot::Failed) ++c.declined;
  }
  return c;
}

TierStats& tier_stats() {
  static TierStats s;
  return s;
}

TierMode tier_mode() { return g_mode.load(std::memory_order_relaxed); }
void set_tier_mode(TierMode mode) { g_mode.store(mode, std::memory_order_relaxed); }
int64_t jit_threshold() { return g_threshold.load(std::memory_order_relaxed); }
void set_jit_threshold(int64_t calls) { g_threshold.store(calls < 1 ? 1 : calls, std::memory_order_relaxed); }

Tier select_tier(const Kernel& k, int64_t calls, backends::Isa isa) {
  const Tier interp{interpreter_for(isa).backend, nullptr};
  TierMode mode = tier_mode();
  if (t_warm_up) [[unlikely]] {
    const BackendRef m = machine_code_for(isa);
    t_warm_up->note(k, m ? &k.slot(m.slot) : nullptr);
    if (mode != TierMode::Off) mode = TierMode::Eager;
  }
  if (mode == TierMode::Off) return interp;
  const BackendRef machine = machine_code_for(isa);
  if (!machine) return interp;
  BackendSlot& slot = k.slot(machine.slot);
  uint8_t state = slot.state.load(std::memory_order_acquire);
  if (state == BackendSlot::Ready) return {machine.backend, slot.code.get()};
  if (mode == TierMode::Eager) {
    // Compiled before this launch whoever compiles it: a compile not yet
    // started is taken over, one under way on another thread (an eager
    // launch, or the background compiler) is waited for.
    for (;;) {
      if (state == BackendSlot::Ready) return {machine.backend, slot.code.get()};
      if (state == BackendSlot::Failed) return interp;
      if ((state == BackendSlot::None || state == BackendSlot::Queued) &&
          slot.state.compare_exchange_strong(state, BackendSlot::Compiling, std::memory_order_acq_rel)) {
        compile_now(k, *machine.backend, slot);
        state = slot.state.load(std::memory_order_acquire);
        continue;
      }
      if (state == BackendSlot::Compiling) {
        std::this_thread::yield();
        state = slot.state.load(std::memory_order_acquire);
      }
    }
  }
  if (state != BackendSlot::None) return interp;
  if (calls + 1 < jit_threshold()) return interp;
  uint8_t expected = BackendSlot::None;
  if (!slot.state.compare_exchange_strong(expected, BackendSlot::Queued, std::memory_order_acq_rel))
    return interp;  // another launch started it
  // The task keeps the kernel alive even if the cache evicts it meanwhile;
  // an eager launch that took the compile over meanwhile leaves it nothing.
  std::shared_ptr<const Kernel> keep = k.shared_from_this();
  const Backend* b = machine.backend;
  compiler().submit([keep, b, &slot] {
    uint8_t queued = BackendSlot::Queued;
    if (slot.state.compare_exchange_strong(queued, BackendSlot::Compiling, std::memory_order_acq_rel))
      compile_now(*keep, *b, slot);
  });
  return interp;
}

void set_compile_executor(CompileExecutorFn fn, void* host) { compiler().set_executor(fn, host); }

void wait_for_compiles() { compiler().wait(); }
bool wait_for_compiles(int64_t timeout_ns) {
  return compiler().wait_for(std::chrono::nanoseconds(timeout_ns > 0 ? timeout_ns : 0));
}

}  // namespace dvm::vm
