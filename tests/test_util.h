/* test_util.h: fixtures shared by the cmocka test programs (header only: each
 * test program is one .c file, tests/CMakeLists.txt builds test_*.c).
 *
 * - test_tmpdir_make / test_tmpdir_remove: a private directory under /tmp
 *   for a program's files, made in setup and removed in teardown;
 * - test_run: run a shell command, return its exit code (-1 if killed);
 * - test_profile_uniform: a cluster of identical, uniformly linked devices
 *   (device 0: peak 1e12 FLOP/s; the others `peak_rest`), parsed through the
 *   real profile loader so that a bad fixture fails loudly.
 * Include after <cmocka.h>. */
#ifndef GOPT_TEST_UTIL_H
#define GOPT_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "gopt_profile.h"

/* Make /tmp/gopt_test_NAME_XXXXXX into dir (size >= 256); 0 on success. */
static inline int test_tmpdir_make(char *dir, size_t size, const char *name) {
    snprintf(dir, size, "/tmp/gopt_test_%s_XXXXXX", name);
    return mkdtemp(dir) ? 0 : -1;
}

static inline int test_tmpdir_remove(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static inline int test_run(const char *cmd) {
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* ndev devices of `mem` bytes each: device 0 peak 1e12 FLOP/s, devices 1.. peak_rest; memory
 * bandwidth 1e11 B/s, launch 1e-6 s; uniform links of 1e9 B/s and 1e-5 s latency. `who` names the
 * test program in the provenance. */
static inline gopt_profile *test_profile_uniform(int ndev, double mem, double peak_rest, const char *who) {
    char txt[2048], rest[512] = "";
    if (ndev >= 2)
        snprintf(rest, sizeof rest,
                 ",{\"name\":\"e\",\"count\":%d,\"kind\":\"gpu\",\"model\":\"m\",\"memory_bytes\":%.17g,"
                 "\"peak_flops\":{\"fp32\":%.17g},\"memory_bandwidth\":1e11,\"launch_overhead\":1e-6}",
                 ndev - 1, mem, peak_rest);
    snprintf(txt, sizeof txt,
             "{\"format\":\"gopt-profile\",\"version\":1,\"name\":\"test\",\"provenance\":{\"source\":\"measured\","
             "\"machine\":\"test\",\"date\":\"today\",\"command\":\"%s\"},"
             "\"devices\":[{\"name\":\"d\",\"count\":1,\"kind\":\"gpu\",\"model\":\"m\",\"memory_bytes\":%.17g,"
             "\"peak_flops\":{\"fp32\":1e12},\"memory_bandwidth\":1e11,\"launch_overhead\":1e-6}%s],"
             "\"topology\":{\"kind\":\"uniform\",\"bandwidth\":1e9,\"latency\":1e-5}}",
             who, mem, rest);
    gopt_profile *p = NULL;
    gopt_error err = {0};
    gopt_status st = gopt_profile_parse(txt, strlen(txt), "test", &p, &err);
    if (st) fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, GOPT_OK);
    return p;
}

#endif
