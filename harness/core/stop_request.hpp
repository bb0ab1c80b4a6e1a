// A stop asked for by a signal (kStopSignals: Slurm's time limit, scancel, Ctrl-C, ...), and what
// a wait that is blocked when one arrives does about it.
//
// A healthy job stops after the step in flight: the ranks agree on the signal after each step.
// But when the launcher signals the job because a peer died (Open MPI sends SIGTERM, then SIGKILL
// a second later), the step never ends. Every polled wait therefore calls
// notice_stop_while_waiting(): once a signal has been pending for kStoppedWaitGrace while a wait
// is still blocked, the hook runs (rank 0 writes what it has), once per process; after
// kStoppedWaitGiveUp the wait gives up (exit 7).
#pragma once

#include <csignal>
#include <functional>
#include <string>

namespace moebench {

// The signals that stop a run after the step in flight, with the interrupted report: TERM (Slurm's
// time limit, scancel, a launcher), INT (Ctrl-C), HUP (a closed terminal or ssh session), PIPE
// (stdout piped into `head` or `grep -m1` that has exited: the write fails, the run stops
// cleanly instead of dying silently), USR1 and USR2 (`sbatch --signal`, a batch system's warning
// before its limit).
inline constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2};
// Each of kStopSignals sets the pending stop signal (the handler only stores it).
void install_stop_handlers();
// The pending stop signal, 0 for none.
int stop_signal();
// Forgets a pending signal and re-arms the hook (for tests, and at the start of a run).
void clear_stop_signal();
// "SIGTERM", "SIGINT", "SIGHUP", "SIGPIPE", "SIGUSR1", "SIGUSR2" or "signal N".
std::string signal_name(int sig);

// What a blocked wait does when a stop signal is pending: called with what it waits for.
using StoppedWaitHook = std::function<void(const std::string& waiting_for)>;
void set_stopped_wait_hook(StoppedWaitHook hook);
// How long a signal is pending, with a wait still blocked, before the hook runs: long enough that
// a healthy step's short waits end first, short enough to act before the launcher's SIGKILL.
inline constexpr double kStoppedWaitGrace = 0.1;  // seconds

// How long a wait may stay blocked once a signal is pending before it gives up: a healthy step's
// waits end well within it (Slurm signals 120 s before the limit), while a launcher that sends
// SIGTERM to the survivors of a dead rank and SIGKILL only after its KillWait (srun: 30 s by
// default) would otherwise leave them waiting for the whole --timeout.
inline constexpr double kStoppedWaitGiveUp = 20;  // seconds

// Called by every polled wait on each poll that found it not yet complete. Cheap when no signal
// is pending; runs the hook at most once per signal; throws Error(ExitCode::interrupted) naming
// what() once the signal has been pending for kStoppedWaitGiveUp.
void notice_stop_while_waiting(const std::function<std::string()>& what);

}  // namespace moebench
