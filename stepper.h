/* stepper.h — the keys of step mode (--step): one keypress at a time from a
 * terminal, or one letter per line when stdin is a pipe or a file. */
#ifndef QKV_STEPPER_H
#define QKV_STEPPER_H

typedef enum {
    KEY_NEXT,       /* Enter, space, n: the next token */
    KEY_CONTINUE,   /* c: run to the end without pausing */
    KEY_QUIT,       /* q, Ctrl-D, end of input */
    KEY_HEAD_NEXT,  /* l, right arrow */
    KEY_HEAD_PREV,  /* h, left arrow */
    KEY_LAYER_NEXT, /* j, down arrow */
    KEY_LAYER_PREV, /* k, up arrow */
    KEY_LAYER_WEIGHTS, /* a: the chosen layer's heads side by side, or back to one head */
    KEY_MATRIX,     /* m: the chosen head's last query rows as a matrix (the causal mask), or back */
    KEY_HELP,       /* ? */
    KEY_REDRAW,     /* Ctrl-L: the view again (after ?, a resize, Ctrl-Z and fg) */
    KEY_OTHER,
    KEY_NOT_KEYS    /* a line of more than STEP_LINE_MAX bytes from a pipe: not keys (/dev/zero, a binary file) */
} StepKey;

#define STEP_LINE_MAX 4096

/* What the keys do, for ? and --help (several lines, each ending in \n). */
extern const char STEP_KEYS_HELP[], STEP_KEYS_HELP_NARROW[]; /* 80 and 40 columns */

/* Puts the terminal on stdin in raw mode (each key arrives at once, without
 * echo; Ctrl-C still interrupts). Returns 1 if it did, 0 when stdin is not a
 * terminal. The terminal is restored by keys_restore(), at exit, and on
 * SIGINT, SIGTERM and SIGHUP; on Ctrl-Z (SIGTSTP) too, and made raw again
 * when the process is brought back (fg). */
int keys_raw_mode(void);
void keys_restore(void);

/* The next key: one keypress in raw mode, else the first character of a line
 * (an empty line is Enter). KEY_QUIT at the end of input; KEY_NOT_KEYS for
 * a line that does not end within STEP_LINE_MAX bytes (else an endless
 * stream without a newline would be read for ever). */
StepKey keys_read(int raw);

#endif
