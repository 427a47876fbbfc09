/* output_file.h — the files a run writes, two ways.
 *
 * Whole (WholeFile): under a temporary name beside it (PATH.part, made new:
 * a leftover of that name is removed, never truncated), renamed
 * over PATH only when complete, so a run that fails leaves neither a half
 * file nor an empty one, and a reader of PATH never sees it half written:
 * -m quantize's checkpoint and --html's page.
 *
 * Streamed (output_open, output_close): written as the run goes, so a
 * FIFO or /dev/stdout can take it: the trace's text and JSON lines, opened
 * at the start; -m bench's and -m heads' tables and charts, opened once
 * measured (a refused run leaves a file already there as it was). Every
 * path is checked at the start (output_check), so a bad one fails before
 * minutes of work. */
#ifndef QKV_OUTPUT_FILE_H
#define QKV_OUTPUT_FILE_H

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

/* The temporary's name for path (a link's file + ".part") into part
 * (part_len bytes, may be 0); returns its length, as snprintf does. */
size_t whole_file_part(const char *path, char *part, size_t part_len);

/* Opens the temporary of path. Returns 0, or -1 with err (what names the
 * file in it). */
int whole_file_open(WholeFile *w, const char *path, const char *what, char *err, size_t err_len);

/* Closes the temporary and renames it over the path. Returns 0, or -1 with
 * err if a write or the rename failed (then the temporary is removed). */
int whole_file_commit(WholeFile *w, char *err, size_t err_len);

/* Closes and removes the temporary, if still open; frees the names. */
void whole_file_abandon(WholeFile *w);

/* Where a write to path lands (out: PATH_MAX bytes): symbolic links
 * followed, a dangling one's too (a write would make its file), made
 * absolute through its directory (where the directory is missing, the
 * place as the links give it, so a write there fails); path itself when
 * a name is too long. */
const char *output_target(const char *path, char *out);

/* Whether path can be written (streamed: an existing file open to writing,
 * or a new one in a directory that takes it; whole: a directory that takes
 * its temporary), checked before any output is opened, so that a run
 * refused for its last output has not truncated its first. Returns 0, or
 * -1 with err (what names the file in it). */
int output_check(const char *path, int whole, const char *what, char *err, size_t err_len);

/* The descriptor (1 or 2) of the standard stream whose regular file path
 * names (/dev/stdout, or the file itself, with stdout sent to a file), or
 * -1: a streamed output there is written through the stream (output_open);
 * one written whole is refused (renamed over it, it would replace what the
 * stream wrote: check_paths). */
int output_standard_stream(const char *path);

/* 1 when descriptor fd writes to the regular file path (by device and
 * inode) */
int stream_goes_to(int fd, const char *path);

/* Opens path to write as the run goes (a regular file that is stdout's or
 * stderr's, as /dev/stdout is when stdout goes to a file, is written
 * through that stream's descriptor, not cut and overwritten). Returns the
 * file, or NULL with err (what names the file in it). */
FILE *output_open(const char *path, const char *what, char *err, size_t err_len);

/* A stream of its own onto a copy of descriptor fd, fully buffered (the
 * text trace on stderr: stderr's own stream is unbuffered, and the trace,
 * written a few bytes a call, took 18,611 writes for 40 KB); flush it
 * before anything else writes to fd. NULL with errno if it cannot be had. */
FILE *output_descriptor(int fd);

/* Closes f (opened on path); a write that failed, a full disk among them,
 * shows up here. rc is the run's status so far: a run that already failed
 * keeps its first error in err and its rc; else returns 0, or -1 with err. */
int output_close(FILE *f, const char *path, int rc, char *err, size_t err_len);

/* A terminal's columns (its size, else COLUMNS, else 80); 0 for a file or
 * a pipe */
int terminal_columns(FILE *f);

#endif
