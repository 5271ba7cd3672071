/* replay_main.c: run a fuzz harness without libFuzzer, over files and
 * folders given on the command line (each folder's files in name order).
 * ctest runs one per harness over its seed corpus, so that every build,
 * gcc-only ones included, replays the regression inputs. Exit 0 when every
 * input returned (a finding aborts); 2 on a usage or I/O error. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 0;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) return 0;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int n = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i])) n++;
            else bad = 1;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        char **names = NULL;
        size_t k = 0, cap = 0;
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            if (k == cap) {
                char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *nn);
                if (!nn) break;
                names = nn;
            }
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[k] = malloc(l);
            if (names[k]) snprintf(names[k++], l, "%s/%s", argv[i], e->d_name);
        }
        closedir(d);
        if (k) qsort(names, k, sizeof *names, by_name);
        for (size_t j = 0; j < k; j++) {
            if (run_file(names[j])) n++;
            else bad = 1;
            free(names[j]);
        }
        free(names);
    }
    printf("replayed %d inputs\n", n);
    return bad ? 2 : 0;
}
