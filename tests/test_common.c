/* test_common.c: errors, RNG determinism, buffers, gzip reads, atomic writes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <math.h>

#include "gopt_common.h"

static char tmpdir[256];

static int setup(void **state) {
    (void)state;
    return test_tmpdir_make(tmpdir, sizeof tmpdir, "common");
}
static int teardown(void **state) {
    (void)state;
    return test_tmpdir_remove(tmpdir);
}

static void test_error_and_exit_codes(void **state) {
    (void)state;
    gopt_error err = {0};
    assert_int_equal(gopt_error_set(&err, GOPT_EINVAL, "node '%s': bad %d", "a", 3), GOPT_EINVAL);
    assert_string_equal(err.msg, "node 'a': bad 3");
    gopt_error_prefix(&err, "f.graphml: line %d", 7);
    assert_string_equal(err.msg, "f.graphml: line 7: node 'a': bad 3");
    assert_int_equal(gopt_status_exit_code(GOPT_OK), 0);
    assert_int_equal(gopt_status_exit_code(GOPT_EINVAL), 2);
    assert_int_equal(gopt_status_exit_code(GOPT_EFORMAT), 2);
    assert_int_equal(gopt_status_exit_code(GOPT_EIO), 2);
    assert_int_equal(gopt_status_exit_code(GOPT_ENOMEM), 1);
    assert_int_equal(gopt_status_exit_code(GOPT_EINTERNAL), 1);
    assert_int_equal(gopt_error_set(NULL, GOPT_EIO, "x"), GOPT_EIO); /* NULL err is allowed */
}

static void test_rng_deterministic_and_uniform(void **state) {
    (void)state;
    gopt_rng a, b;
    gopt_rng_seed(&a, 42);
    gopt_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) assert_true(gopt_rng_u64(&a) == gopt_rng_u64(&b));
    gopt_rng_seed(&b, 43);
    int same = 0;
    for (int i = 0; i < 100; i++) same += gopt_rng_u64(&a) == gopt_rng_u64(&b);
    assert_true(same < 2);
    /* below(n) stays in range and hits every bucket */
    int hist[7] = {0};
    double mean = 0;
    for (int i = 0; i < 70000; i++) {
        uint64_t x = gopt_rng_below(&a, 7);
        assert_true(x < 7);
        hist[x]++;
        double u = gopt_rng_uniform(&a);
        assert_true(u >= 0 && u < 1);
        mean += u;
    }
    for (int k = 0; k < 7; k++) assert_true(hist[k] > 9000 && hist[k] < 11000);
    mean /= 70000;
    assert_true(mean > 0.49 && mean < 0.51);
    double s = 0, s2 = 0;
    for (int i = 0; i < 20000; i++) {
        double z = gopt_rng_normal(&a);
        s += z;
        s2 += z * z;
    }
    assert_true(fabs(s / 20000) < 0.05);
    assert_true(fabs(s2 / 20000 - 1) < 0.05);
}

static void test_buf(void **state) {
    (void)state;
    gopt_buf b;
    gopt_buf_init(&b);
    gopt_buf_puts(&b, "ab");
    gopt_buf_printf(&b, "%d-%s", 12, "x");
    for (int i = 0; i < 1000; i++) gopt_buf_printf(&b, "%0300d", i); /* forces growth and long printf */
    assert_int_equal(b.len, 6 + 300000);
    assert_memory_equal(b.data, "ab12-x", 6);
    assert_int_equal(b.data[b.len], '\0');
    gopt_buf_destroy(&b);
}

static void test_atomic_write_and_gzip_roundtrip(void **state) {
    (void)state;
    char path[400], *data = NULL;
    size_t len = 0;
    gopt_error err = {0};
    const char *text = "hello, graph\n";
    snprintf(path, sizeof path, "%s/x.txt.gz", tmpdir);
    assert_int_equal(gopt_file_write_atomic(path, text, strlen(text), 6, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(path, &data, &len, &err), GOPT_OK);
    assert_int_equal(len, strlen(text));
    assert_string_equal(data, text);
    free(data);
    /* a failed write (missing folder) reports the path and leaves nothing */
    snprintf(path, sizeof path, "%s/no/such/dir/x.txt", tmpdir);
    assert_int_equal(gopt_file_write_atomic(path, text, 3, 0, &err), GOPT_EIO);
    assert_non_null(strstr(err.msg, "no/such/dir/x.txt"));
    /* overwriting keeps the old content until the rename */
    snprintf(path, sizeof path, "%s/y.txt", tmpdir);
    assert_int_equal(gopt_file_write_atomic(path, "old", 3, 0, &err), GOPT_OK);
    assert_int_equal(gopt_file_write_atomic(path, "newer", 5, 0, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(path, &data, &len, &err), GOPT_OK);
    assert_string_equal(data, "newer");
    free(data);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", tmpdir);
    FILE *p = popen(cmd, "r");
    int ntmp = -1;
    assert_int_equal(fscanf(p, "%d", &ntmp), 1);
    pclose(p);
    assert_int_equal(ntmp, 0);
}

static void test_bad_gzip(void **state) {
    (void)state;
    char path[400], trunc[400], *data = NULL;
    size_t len = 0;
    gopt_error err = {0};
    char big[20000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + (i * 7919) % 26);
    snprintf(path, sizeof path, "%s/big.gz", tmpdir);
    assert_int_equal(gopt_file_write_atomic(path, big, sizeof big, 6, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(path, &data, &len, &err), GOPT_OK);
    free(data);
    data = NULL;
    FILE *f = fopen(path, "rb");
    unsigned char raw[40000];
    size_t n = fread(raw, 1, sizeof raw, f);
    fclose(f);
    /* truncated */
    snprintf(trunc, sizeof trunc, "%s/trunc.gz", tmpdir);
    assert_int_equal(gopt_file_write_atomic(trunc, raw, n / 2, 0, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(trunc, &data, &len, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "truncated"));
    assert_non_null(strstr(err.msg, "trunc.gz"));
    assert_null(data);
    /* corrupt: flip bytes in the middle of the deflate stream */
    for (size_t i = n / 3; i < n / 3 + 16; i++) raw[i] ^= 0x5a;
    assert_int_equal(gopt_file_write_atomic(trunc, raw, n, 0, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(trunc, &data, &len, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "trunc.gz"));
    /* .gz name but plain content */
    assert_int_equal(gopt_file_write_atomic(trunc, "plain", 5, 0, &err), GOPT_OK);
    assert_int_equal(gopt_file_read_all(trunc, &data, &len, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "not gzip"));
    /* missing file */
    assert_int_equal(gopt_file_read_all("/nonexistent/gopt.graphml", &data, &len, &err), GOPT_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/gopt.graphml"));
}

/* The one UTF-8 decoder: every valid length, and each way a sequence is not valid. */
static void test_utf8_decode(void **state) {
    (void)state;
    uint32_t cp = 0;
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"A", 1, &cp), 1);
    assert_int_equal(cp, 0x41);
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xc3\xa9", 2, &cp), 2);
    assert_int_equal(cp, 0xE9);
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xef\xbf\xbd", 3, &cp), 3);
    assert_int_equal(cp, 0xFFFD);
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xf4\x8f\xbf\xbf", 4, &cp), 4);
    assert_int_equal(cp, 0x10FFFF);
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\x80", 1, &cp), 0);             /* continuation */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xc0\x80", 2, &cp), 0);         /* overlong NUL */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xe0\x80\x80", 3, &cp), 0);     /* overlong */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xed\xa0\x80", 3, &cp), 0);     /* surrogate */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xf4\x90\x80\x80", 4, &cp), 0); /* > U+10FFFF */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xc3\xa9", 1, &cp), 0);         /* truncated */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xc3" "A", 2, &cp), 0);             /* bad continuation */
    assert_int_equal(gopt_utf8_decode((const unsigned char *)"\xff", 1, &cp), 0);
}

static gopt_status num_check(const char *text, gopt_error *err) {
    return gopt_json_check_numbers(text, strlen(text), "f.json", err);
}

static void test_json_check_numbers(void **state) {
    (void)state;
    gopt_error err = {0};
    /* accepted: every double, integers (left to jansson), zeros however written, text that is not JSON */
    assert_int_equal(num_check("{\"a\": [0.0, -0e-999, 1e-300, 2.2250738585072014e-308, 1.7e308, -5, 123456789012345678901234]}", &err), GOPT_OK);
    assert_int_equal(num_check("{\"s\": \"1e-400 in a string \\\" 1e999\", \"t\": 1.5}", &err), GOPT_OK);
    assert_int_equal(num_check("{\"a\": [1e-400", &err) == GOPT_EFORMAT, 1); /* unterminated: still scanned */
    assert_int_equal(num_check("not json at all ]]} {{", &err), GOPT_OK);
    assert_int_equal(num_check("", &err), GOPT_OK);
    /* refused, naming the file, the line, the element and the number */
    static const struct {
        const char *text, *want;
    } BAD[] = {
        {"{\"a\": 1e-400}", "f.json: line 1: a: the number 1e-400 is below the smallest double and would read as 0"},
        {"{\"a\": {\"b\": [1, 2,\n -3.5e-320]}}", "f.json: line 2: a.b[2]: the number -3.5e-320 is below the smallest normal double"},
        {"[{\"x\": 1}, {\"y\": 1e400}]", "f.json: line 1: [1].y: the number 1e400 is beyond the largest double"},
        {"{\"a\": {\"b\": 1}, \"c\": [[], [0.5, 1E-401]]}", "line 1: c[1][1]: the number 1E-401"},
        {"1e-400", "line 1: (the top-level value): the number 1e-400"},
        {"{\"step\": 1}\n{\"step\": 2, \"r\": 9e9999}\n", "line 2: r: the number 9e9999"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        assert_int_equal(num_check(BAD[i].text, &err), GOPT_EFORMAT);
        if (!strstr(err.msg, BAD[i].want)) fail_msg("case %zu: %s", i, err.msg);
    }
    /* a number longer than the scan's stack buffer, and one only its later digits make nonzero */
    char big[600];
    snprintf(big, sizeof big, "{\"k\": 0.%0500d1e-10}", 0);
    assert_int_equal(num_check(big, &err), GOPT_EFORMAT);
    assert_non_null(strstr(err.msg, "k: the number 0.000"));
    assert_non_null(strstr(err.msg, "... is below"));
    snprintf(big, sizeof big, "{\"k\": 0.%0300d1}", 0);
    assert_int_equal(num_check(big, &err), GOPT_OK); /* 1e-301: in range */
    /* bounded: only len bytes are read */
    assert_int_equal(gopt_json_check_numbers("{\"a\": 1e-4001", 11, "f", &err), GOPT_OK); /* sees 1e-40 */
}


/* the radix sort against qsort on (key, position): ties keep their order */
typedef struct {
    uint64_t key;
    int32_t val, pos;
} ref_pair;
static int ref_cmp(const void *a, const void *b) {
    const ref_pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static void test_sort_pairs(void **state) {
    (void)state;
    gopt_rng r;
    gopt_rng_seed(&r, 7);
    enum { N = 3000 };
    gopt_sort_pair *a = malloc(sizeof *a * N), *tmp = malloc(sizeof *tmp * N);
    ref_pair *ref = malloc(sizeof *ref * N);
    for (int trial = 0; trial < 6; trial++) {
        const int n = trial == 0 ? 1 : trial == 1 ? 2 : N;
        for (int i = 0; i < n; i++) {
            uint64_t k = gopt_rng_u64(&r);
            if (trial == 3) k %= 7;                       /* many ties, one varying byte */
            if (trial == 4) k = (k % 5) << 40 | (k & 0xff); /* bytes all keys share */
            if (trial == 5) {                              /* doubles, decreasing */
                static const double v[] = {0.0, -0.0, 1.5, -2.0, 1e300, 3e-300, 1.5, 7.25};
                k = gopt_sort_key_desc(v[gopt_rng_below(&r, 8)] * (gopt_rng_below(&r, 3) ? 1.0 : 0.5));
            }
            a[i] = (gopt_sort_pair){k, (int32_t)(i * 31 % 1009)};
            ref[i] = (ref_pair){k, a[i].val, i};
        }
        gopt_sort_pairs(a, tmp, (size_t)n);
        qsort(ref, (size_t)n, sizeof *ref, ref_cmp);
        for (int i = 0; i < n; i++) {
            assert_true(a[i].key == ref[i].key);
            assert_int_equal(a[i].val, ref[i].val);
        }
    }
    /* the key orders doubles decreasingly; -0 and +0 are one key */
    const double xs[] = {1e300, 2.5, 1.0, 3e-300, 0.0, -3e-300, -1.0, -1e300};
    for (int i = 0; i + 1 < 8; i++) assert_true(gopt_sort_key_desc(xs[i]) < gopt_sort_key_desc(xs[i + 1]));
    assert_true(gopt_sort_key_desc(0.0) == gopt_sort_key_desc(-0.0));
    free(a);
    free(tmp);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_and_exit_codes),
        cmocka_unit_test(test_rng_deterministic_and_uniform),
        cmocka_unit_test(test_buf),
        cmocka_unit_test(test_utf8_decode),
        cmocka_unit_test(test_json_check_numbers),
        cmocka_unit_test(test_sort_pairs),
        cmocka_unit_test(test_atomic_write_and_gzip_roundtrip),
        cmocka_unit_test(test_bad_gzip),
    };
    return cmocka_run_group_tests_name("common", tests, setup, teardown);
}
