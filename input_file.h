/* input_file.h — opening a file a run reads (the checkpoint, a tokenizer,
 * a prompt or a text to score): a regular file only, its size known before
 * a byte is read. Shared by checkpoint.h, tokenizer.c and cli.c. */
#ifndef QKV_INPUT_FILE_H
#define QKV_INPUT_FILE_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>

#define INPUT_CANNOT_OPEN (-1) /* open failed: errno says why */
#define INPUT_NOT_REGULAR (-2) /* a directory, FIFO or device */

/* path opened to read, never waiting (O_NONBLOCK: open would block on a
 * FIFO without a writer), and only if it is a regular file (a device could
 * run forever or fill memory, a directory has no bytes). Returns the
 * descriptor, its size in *size, or INPUT_CANNOT_OPEN or INPUT_NOT_REGULAR. */
static inline int input_open(const char *path, size_t *size) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return INPUT_CANNOT_OPEN;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return INPUT_NOT_REGULAR;
    }
    *size = (size_t)st.st_size;
    return fd;
}

#endif
