/* whole_file.h — a file written whole: under a temporary name beside it
 * (PATH.part), renamed over PATH only when complete, so a run that fails
 * leaves neither a half file nor an empty one, and a reader of PATH never
 * sees it half written. -m quantize's checkpoint and --html's page. */
#ifndef QKV_WHOLE_FILE_H
#define QKV_WHOLE_FILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    FILE *f;    /* write here; NULL once committed or abandoned */
    char *path; /* where it goes: a symbolic link's file, not the link */
    char *part; /* path + ".part" */
} WholeFile;

/* Why path cannot take a file renamed over it: it is a directory, a FIFO
 * or a device (renamed over, the thing itself would be replaced); NULL if
 * it can (a regular file, a link to one, or nothing yet). */
const char *whole_file_refusal(const char *path);

/* Opens the temporary of path. Returns 0, or -1 with err (what names the
 * file in it). */
int whole_file_open(WholeFile *w, const char *path, const char *what, char *err, size_t err_len);

/* Closes the temporary and renames it over the path. Returns 0, or -1 with
 * err if a write or the rename failed (then the temporary is removed). */
int whole_file_commit(WholeFile *w, char *err, size_t err_len);

/* Closes and removes the temporary, if still open; frees the names. */
void whole_file_abandon(WholeFile *w);

#endif
