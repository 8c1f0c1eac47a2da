#!/usr/bin/python3
"""--cpu-policy of podium-scheduler and podium-plugin-host (podium-k8s-adapter's:
test_k8s_adapter.py, K8sAdapterCpuPolicyTest): every thread of the
process runs under the Linux scheduling policy asked for (SCHED_BATCH by
default, SCHED_OTHER with `normal`), read from /proc/PID/task/*/stat once the
process serves (its gRPC and worker threads exist); an unknown policy is
refused naming the flag. A missing binary FAILS the test."""

import subprocess

import podium_testlib as lib


class CpuPolicyTest(lib.IntegrationTest):

    def start(self, flags):
        """A plugin host and a scheduler dialling it, both serving; returns their pids."""
        self.start_scheduler(None, flags=flags)
        return {"podium-plugin-host": self.host_process.proc.pid, "podium-scheduler": self.scheduler_process.proc.pid}

    def assert_every_thread(self, pids, policy):
        for name, pid in pids.items():
            policies = lib.thread_policies(pid)
            # gRPC's pollers and timers, the async driver, executors: not just main.
            self.assertGreater(len(policies), 3, f"{name}: {policies}")
            self.assertEqual(set(policies.values()), {policy}, f"{name} threads (tid: policy): {policies}")

    def test_every_thread_runs_batch_by_default(self):
        lib.require_binaries(self, "scheduler", "plugin_host")
        self.assert_every_thread(self.start([]), lib.SCHED_BATCH)

    def test_normal_keeps_sched_other(self):
        lib.require_binaries(self, "scheduler", "plugin_host")
        self.assert_every_thread(self.start(["--cpu-policy=normal"]), lib.SCHED_OTHER)

    def test_unknown_policy_is_refused_naming_the_flag(self):
        lib.require_binaries(self, "scheduler", "plugin_host")
        for argv, name in (([lib.Flags.plugin_host, "--listen", "127.0.0.1:0", "--cpu-policy", "fifo"],
                            "podium-plugin-host"),
                           ([lib.Flags.scheduler, "--listen", f"unix://{self.path('s.sock')}", "--metrics-address=",
                             "--cpu-policy=fifo"], "podium-scheduler")):
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            self.assertNotEqual(p.returncode, 0, p.stderr)
            self.assertIn('--cpu-policy: "fifo" is neither batch nor normal', p.stderr, f"{name}: {p.stderr}")


if __name__ == "__main__":
    lib.main()
