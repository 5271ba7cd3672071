/* fileio.c: whole-file reads with transparent gunzip, atomic writes.
 *
 * Reads slurp the file, then inflate in memory when it starts with the gzip
 * magic (1f 8b); concatenated gzip members are accepted, a stream that ends
 * early or fails its CRC is GOPT_EFORMAT. Writes go to "<path>.tmp.<pid>",
 * are fsynced, then renamed over the target, so a reader never sees a half
 * file and a failed write leaves the old file intact. */
#include "gopt_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

int gopt_path_is_gz(const char *path) {
    size_t n = strlen(path);
    return n >= 3 && strcmp(path + n - 3, ".gz") == 0;
}

static gopt_status slurp(const char *path, unsigned char **out, size_t *len, gopt_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return gopt_error_set(err, GOPT_EIO, "%s: cannot open: %s", path, strerror(errno));
    gopt_status st = GOPT_OK;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = NULL;
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return gopt_error_set(err, GOPT_EIO, "%s: is a directory, not a file", path);
    }
    if (fstat(fileno(f), &sb) == 0 && sb.st_size > 0) cap = (size_t)sb.st_size + 1;
    buf = malloc(cap);
    if (!buf) {
        st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory reading %zu bytes", path, cap);
        goto out;
    }
    for (;;) {
        if (n == cap) {
            unsigned char *p = realloc(buf, cap * 2);
            if (!p) {
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory reading", path);
                goto out;
            }
            buf = p;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (ferror(f)) st = gopt_error_set(err, GOPT_EIO, "%s: read error: %s", path, strerror(errno));
out:
    fclose(f);
    if (st != GOPT_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *len = n;
    return GOPT_OK;
}

static gopt_status gunzip(const char *path, const unsigned char *in, size_t in_len, char **out, size_t *out_len,
                          gopt_error *err) {
    size_t cap = in_len * 4 + 1024;
    if (in_len >= 18) { /* ISIZE of the last member: a good first guess, unless no deflate stream of
                         * in_len bytes could inflate to it (1032:1 at most): a corrupt trailer must not
                         * make a 30-byte file allocate gigabytes */
        uint32_t isize = (uint32_t)in[in_len - 4] | (uint32_t)in[in_len - 3] << 8 | (uint32_t)in[in_len - 2] << 16 |
                         (uint32_t)in[in_len - 1] << 24;
        if ((size_t)isize + 1 > cap && isize < (1u << 31) && (size_t)isize <= in_len * 1032) cap = (size_t)isize + 1;
    }
    char *buf = malloc(cap);
    if (!buf) return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory decompressing", path);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 16) != Z_OK) {
        free(buf);
        return gopt_error_set(err, GOPT_EINTERNAL, "%s: zlib inflateInit failed", path);
    }
    zs.next_in = (unsigned char *)in;
    zs.avail_in = (uInt)in_len; /* inputs over 4 GiB are not supported */
    size_t n = 0;
    gopt_status st = GOPT_OK;
    for (;;) {
        if (cap - n < 2) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                st = gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory decompressing", path);
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t room = cap - n - 1;
        zs.next_out = (unsigned char *)buf + n;
        zs.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
        uInt before = zs.avail_out;
        int rc = inflate(&zs, Z_NO_FLUSH);
        n += before - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0) break;
            /* another gzip member follows, or trailing garbage */
            if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b) {
                inflateReset(&zs);
                continue;
            }
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: trailing garbage after the gzip stream", path);
            break;
        }
        if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: truncated gzip stream (ends after %zu bytes)", path, in_len);
            break;
        }
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = gopt_error_set(err, GOPT_EFORMAT, "%s: corrupt gzip stream: %s", path,
                                zs.msg ? zs.msg : "inflate failed");
            break;
        }
    }
    inflateEnd(&zs);
    if (st != GOPT_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return GOPT_OK;
}

gopt_status gopt_file_read_all(const char *path, char **out, size_t *len, gopt_error *err) {
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    gopt_status st = slurp(path, &raw, &raw_len, err);
    if (st != GOPT_OK) return st;
    if (raw_len >= 2 && raw[0] == 0x1f && raw[1] == 0x8b) {
        st = gunzip(path, raw, raw_len, out, len, err);
        free(raw);
        return st;
    }
    if (gopt_path_is_gz(path)) {
        free(raw);
        return gopt_error_set(err, GOPT_EFORMAT, "%s: name ends in .gz but the file is not gzip data", path);
    }
    unsigned char *p = realloc(raw, raw_len + 1);
    if (!p) {
        free(raw);
        return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    }
    p[raw_len] = '\0';
    *out = (char *)p;
    *len = raw_len;
    return GOPT_OK;
}

static gopt_status gzip_mem(const char *path, const void *data, size_t len, int level, unsigned char **out,
                            size_t *out_len, gopt_error *err) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return gopt_error_set(err, GOPT_EINTERNAL, "%s: zlib deflateInit failed", path);
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&zs);
        return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory compressing", path);
    }
    zs.next_in = (unsigned char *)data;
    zs.avail_in = (uInt)len;
    zs.next_out = buf;
    zs.avail_out = (uInt)cap;
    int rc = deflate(&zs, Z_FINISH);
    size_t n = cap - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(buf);
        return gopt_error_set(err, GOPT_EINTERNAL, "%s: zlib deflate failed (%d)", path, rc);
    }
    *out = buf;
    *out_len = n;
    return GOPT_OK;
}

gopt_status gopt_file_write_atomic(const char *path, const void *data, size_t len, int gzip_level,
                                   gopt_error *err) {
    unsigned char *z = NULL;
    if (gzip_level > 0) {
        gopt_status st = gzip_mem(path, data, len, gzip_level > 9 ? 9 : gzip_level, &z, &len, err);
        if (st != GOPT_OK) return st;
        data = z;
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(z);
        return gopt_error_set(err, GOPT_ENOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    gopt_status st = GOPT_OK;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        st = gopt_error_set(err, GOPT_EIO, "%s: cannot create: %s", path, strerror(errno));
        goto out;
    }
    const unsigned char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            st = gopt_error_set(err, GOPT_EIO, "%s: write failed: %s", path, strerror(errno));
            break;
        }
        p += w;
        left -= (size_t)w;
    }
    if (st == GOPT_OK && fsync(fd) != 0)
        st = gopt_error_set(err, GOPT_EIO, "%s: fsync failed: %s", path, strerror(errno));
    if (close(fd) != 0 && st == GOPT_OK)
        st = gopt_error_set(err, GOPT_EIO, "%s: close failed: %s", path, strerror(errno));
    if (st == GOPT_OK && rename(tmp, path) != 0)
        st = gopt_error_set(err, GOPT_EIO, "%s: rename failed: %s", path, strerror(errno));
    if (st != GOPT_OK) unlink(tmp);
out:
    free(tmp);
    free(z);
    return st;
}
