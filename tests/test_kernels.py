"""Kernel, batching and loader checks: runs the C program tests/test_kernels.c
(env KERNELS, default build/test_kernels) and turns each of its checks into a test."""
import os
import common

KERNELS = os.environ.get("KERNELS", os.path.join(common.ROOT, "build", "test_kernels"))


def test_kernels():
    assert os.path.exists(KERNELS), f"missing {KERNELS}: run make test-bins"
    rc, out, err = common.run([common.MODELS], binary=KERNELS, timeout=600)
    lines = out.decode().splitlines()
    checks = [l for l in lines if l.startswith("ok ") or l.startswith("FAIL ")]
    assert checks, f"no checks ran (exit {rc}): {err[-2000:]}"
    for line in checks:
        name = line.split()[1].rstrip(":")

        def one(line=line):
            assert line.startswith("ok "), line
        yield name, one
    def exit_status(rc=rc, err=err):
        assert rc == 0 and not err.strip(), f"exit {rc}, stderr: {err[-3000:]}"
    yield "exit_status_and_clean_stderr", exit_status
