/* output_file.c — the files a run writes: whole, or streamed (see output_file.h). */
#define _XOPEN_SOURCE 700 /* realpath (POSIX's XSI part) */
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

const char *whole_file_refusal(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return NULL;
    return S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or other";
}

/* The directory part of path ("x/" of "x/y", "" of "y") into dir */
static void directory_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    snprintf(dir, cap, "%.*s", slash ? (int)(slash - path) + 1 : 0, path);
}

const char *output_target(const char *path, char *out) {
    char at[PATH_MAX], link[PATH_MAX], dir[PATH_MAX], real[PATH_MAX];
    if (snprintf(at, sizeof at, "%s", path) >= (int)sizeof at) return path;
    for (int hops = 0; hops < 40; hops++) { /* Linux's own limit on links followed */
        ssize_t n = readlink(at, link, sizeof link - 1);
        if (n < 0) break;
        link[n] = '\0';
        directory_of(at, dir, sizeof dir); /* a relative link is read from its own directory */
        if (snprintf(at, sizeof at, "%s%s", link[0] == '/' ? "" : dir, link) >= (int)sizeof at) return path;
    }
    directory_of(at, dir, sizeof dir);
    const char *base = at + strlen(dir);
    if (!realpath(dir[0] ? dir : ".", real)) { /* a missing directory: the place as the links give it */
        memcpy(out, at, strlen(at) + 1);
        return out;
    }
    return snprintf(out, PATH_MAX, "%s/%s", real, base) < PATH_MAX ? out : path;
}

size_t whole_file_part(const char *path, char *part, size_t part_len) {
    char target[PATH_MAX];
    /* a link is followed, a dangling one too: the link stays, its file is replaced (or made) */
    return (size_t)snprintf(part, part_len, "%s.part", output_target(path, target));
}

int output_check(const char *path, int whole, const char *what, char *err, size_t err_len) {
    struct stat st;
    char target[PATH_MAX], dir[PATH_MAX];
    if (!whole && stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) errno = EISDIR;
        else if (access(path, W_OK) == 0) return 0;
    } else if (whole || errno == ENOENT) { /* made new (or renamed over): its directory must take it */
        directory_of(output_target(path, target), dir, sizeof dir);
        if (access(dir[0] ? dir : ".", W_OK | X_OK) == 0) return 0;
    }
    snprintf(err, err_len, "cannot write %s %s: %s", what, path, strerror(errno));
    return -1;
}

int whole_file_open(WholeFile *w, const char *path, const char *what, char *err, size_t err_len) {
    const char *refused = whole_file_refusal(path);
    memset(w, 0, sizeof *w);
    if (refused) {
        snprintf(err, err_len, "%s %s is %s, not a regular file: give the path of a file to write", what, path, refused);
        return -1;
    }
    size_t n = whole_file_part(path, NULL, 0) + 1;
    w->path = malloc(n);
    w->part = malloc(n);
    if (!w->path || !w->part) {
        snprintf(err, err_len, "out of memory");
        whole_file_abandon(w);
        return -1;
    }
    whole_file_part(path, w->part, n);
    memcpy(w->path, w->part, n - sizeof ".part");
    w->path[n - sizeof ".part"] = '\0';
    /* A new file: an earlier run's leftover (or a link of that name) is
     * removed, never opened and truncated. check_paths refused a run that
     * reads the file of this name. */
    if (unlink(w->part) != 0 && errno != ENOENT) {
        snprintf(err, err_len, "cannot write %s %s: its temporary %s: %s", what, path, w->part, strerror(errno));
        whole_file_abandon(w);
        return -1;
    }
    int fd = open(w->part, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 || !(w->f = fdopen(fd, "wb"))) {
        snprintf(err, err_len, "cannot write %s %s: %s", what, path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            remove(w->part);
        }
        whole_file_abandon(w);
        return -1;
    }
    return 0;
}

int whole_file_commit(WholeFile *w, char *err, size_t err_len) {
    /* the reason of the call that failed, read at once; an earlier write's
     * is gone (errno has moved on since), so one byte more is written to
     * learn it: its cause (a full disk, a file-size limit) stops that one
     * too, and the file is removed either way */
    int wrote = ferror(w->f) == 0, reason = 0;
    if (!wrote) {
        clearerr(w->f);
        if (fputc(0, w->f) == EOF || fflush(w->f) != 0) reason = errno;
    }
    if (fclose(w->f) != 0 && !reason) reason = errno;
    w->f = NULL;
    if (wrote && !reason && rename(w->part, w->path) != 0) reason = errno;
    int failed = !wrote || reason;
    if (failed) {
        snprintf(err, err_len, "cannot write %s: %s", w->path, reason ? strerror(reason) : "a write to it failed");
        remove(w->part);
    }
    whole_file_abandon(w);
    return failed ? -1 : 0;
}

void whole_file_abandon(WholeFile *w) {
    if (w->f) {
        fclose(w->f);
        remove(w->part);
    }
    free(w->path);
    free(w->part);
    memset(w, 0, sizeof *w);
}

/* (output_file.h) Opened anew, the stream's file would be cut to nothing
 * and written from its start, over the stream's own text; through a
 * duplicate of the stream's descriptor the writes go where the stream's go,
 * as through a pipe (output_open). */
int output_standard_stream(const char *path) {
    for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++)
        if (stream_goes_to(fd, path)) return fd;
    return -1;
}

int stream_goes_to(int fd, const char *path) {
    struct stat p, s;
    return stat(path, &p) == 0 && S_ISREG(p.st_mode) && fstat(fd, &s) == 0 && s.st_dev == p.st_dev &&
           s.st_ino == p.st_ino;
}

FILE *output_open(const char *path, const char *what, char *err, size_t err_len) {
    int stream = output_standard_stream(path);
    FILE *f = stream < 0 ? fopen(path, "w") : output_descriptor(stream);
    if (!f) snprintf(err, err_len, "cannot write %s %s: %s", what, path, strerror(errno));
    return f;
}

FILE *output_descriptor(int fd) {
    fflush(NULL); /* what the streams hold goes first, where a duplicate of theirs would overtake it */
    int copy = dup(fd);
    FILE *f = copy < 0 ? NULL : fdopen(copy, "w");
    if (!f && copy >= 0) close(copy);
    return f;
}

int output_close(FILE *f, const char *path, int rc, char *err, size_t err_len) {
    int failed = ferror(f) != 0, closed = fclose(f) == 0;
    if (rc) return rc; /* err holds the run's first error */
    if (!closed) snprintf(err, err_len, "cannot write %s: %s", path, strerror(errno));
    else if (failed) /* an earlier write's reason is gone: errno has moved on since */
        snprintf(err, err_len, "cannot write %s: a write to it failed", path);
    else return 0;
    return -1;
}

int terminal_columns(FILE *f) {
    if (!isatty(fileno(f))) return 0;
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    const char *columns = getenv("COLUMNS");
    int n = columns ? atoi(columns) : 0;
    return n > 0 ? n : 80;
}
