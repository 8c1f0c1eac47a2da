#!/usr/bin/python3
"""The service binaries allocate with tcmalloc (CMake's PODIUM_TCMALLOC, on by
default): podium-scheduler and podium-plugin-host have libtcmalloc_minimal
mapped once they serve, and podium-sim and podium-k8s-adapter load it (ldd).
Registered only for a build that links it. A missing binary FAILS the test."""

import os
import subprocess

import podium_testlib as lib

K8S_ADAPTER = lib.take_flag("--k8s-adapter")
TCMALLOC = "libtcmalloc_minimal"


def mapped_libraries(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {line.split()[-1] for line in f if len(line.split()) >= 6}


class AllocatorTest(lib.IntegrationTest):

    def test_service_binaries_allocate_with_tcmalloc(self):
        lib.require_binaries(self, "scheduler", "plugin_host", "sim")
        self.assertTrue(K8S_ADAPTER and os.path.exists(K8S_ADAPTER), f"--k8s-adapter {K8S_ADAPTER}")
        self.start_scheduler(None)
        for name, process in (("podium-plugin-host", self.host_process), ("podium-scheduler", self.scheduler_process)):
            libs = mapped_libraries(process.proc.pid)
            self.assertTrue(any(TCMALLOC in path for path in libs), f"{name} maps: {sorted(libs)}")
        for binary in (lib.Flags.sim, K8S_ADAPTER):
            out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
            self.assertIn(TCMALLOC, out, f"{binary}:\n{out}")


if __name__ == "__main__":
    lib.main()
