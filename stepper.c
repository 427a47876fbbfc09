/* stepper.c — the keys of step mode (see stepper.h). */
#include "stepper.h"

#include <ctype.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <unistd.h>

const char STEP_KEYS_HELP[] =
    "  Enter, space, n   next token          c   run to the end (no more pauses)\n"
    "  q                 quit                ?   these keys\n"
    "  l / h, right/left next / previous head\n"
    "  j / k, down/up    next / previous layer\n"
    "  a                 the layer's heads side by side, or back to one head\n"
    "  m                 the head's last queries as rows of a matrix: the mask\n"
    "  Ctrl-L            the view again (after ?, a resize, Ctrl-Z and fg)\n"
    "  (heads and layers wrap around; Ctrl-C quits too. A head's line: > marks\n"
    "  the chosen one; tok@pos w: a key's token, its position, its weight.\n"
    "  A table shows the keys the terminal's rows hold; --trace-out FILE keeps\n"
    "  every key of every head)\n";

/* The same in 40 columns, for a narrower terminal */
const char STEP_KEYS_HELP_NARROW[] =
    "  Enter, space, n  next token\n"
    "  c  run to the end (no more pauses)\n"
    "  q  quit    ?  these keys\n"
    "  l / h, right/left  next/previous head\n"
    "  j / k, down/up  next/previous layer\n"
    "  a  the layer's heads side by side,\n"
    "     or back to one head\n"
    "  m  the head's last queries as rows:\n"
    "     the causal mask\n"
    "  Ctrl-L  the view again\n"
    "  (heads and layers wrap around;\n"
    "  Ctrl-C quits too)\n";

/* The terminal's settings before raw mode. A signal handler has to reach
 * them to restore the terminal on Ctrl-C, and a handler takes no argument:
 * hence this one file-scope variable. */
static struct {
    struct termios saved, raw_settings;
    volatile sig_atomic_t raw;
} terminal;

void keys_restore(void) {
    if (terminal.raw) tcsetattr(STDIN_FILENO, TCSANOW, &terminal.saved);
    terminal.raw = 0;
}

/* Restores the terminal, then dies of the same signal as before. */
static void restore_and_reraise(int sig) {
    keys_restore(); /* tcsetattr is async-signal-safe */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Ctrl-Z: the shell gets its terminal back as it was, the process stops;
 * on fg (SIGCONT) it carries on here, and the keys are raw again */
static void suspend(int sig) {
    int was_raw = terminal.raw;
    if (was_raw) tcsetattr(STDIN_FILENO, TCSANOW, &terminal.saved);
    sigset_t tstp;
    sigemptyset(&tstp);
    sigaddset(&tstp, sig);
    signal(sig, SIG_DFL);
    sigprocmask(SIG_UNBLOCK, &tstp, NULL);
    raise(sig); /* stops until SIGCONT */
    struct sigaction sa = { 0 };
    sa.sa_handler = suspend;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    if (was_raw) tcsetattr(STDIN_FILENO, TCSANOW, &terminal.raw_settings);
}

int keys_raw_mode(void) {
    if (terminal.raw) return 1;
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &terminal.saved)) return 0;
    struct termios raw = terminal.saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl-C still sends SIGINT */
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw)) return 0;
    terminal.raw_settings = raw;
    terminal.raw = 1;
    atexit(keys_restore);
    struct sigaction sa = { 0 };
    sa.sa_handler = restore_and_reraise;
    sigemptyset(&sa.sa_mask);
    int signals[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaction(signals[i], &sa, NULL);
    sa.sa_handler = suspend;
    sa.sa_flags = SA_RESTART; /* the read of the next key goes on after fg */
    sigaction(SIGTSTP, &sa, NULL);
    return 1;
}

static StepKey key_of_char(int c) {
    switch (tolower(c)) {
    case '\r': case '\n': case ' ': case 'n': return KEY_NEXT;
    case 'c': return KEY_CONTINUE;
    case 'q': case 4: return KEY_QUIT; /* 4: Ctrl-D */
    case 'l': return KEY_HEAD_NEXT;
    case 'h': return KEY_HEAD_PREV;
    case 'j': return KEY_LAYER_NEXT;
    case 'k': return KEY_LAYER_PREV;
    case 'a': return KEY_LAYER_WEIGHTS;
    case 'm': return KEY_MATRIX;
    case '?': return KEY_HELP;
    case 12: return KEY_REDRAW; /* Ctrl-L */
    default: return KEY_OTHER;
    }
}

/* One byte if it comes within 50 ms (the rest of an arrow key's escape
 * sequence arrives at once; a lone Esc does not wait forever). */
static int byte_soon(void) {
    struct pollfd p = { STDIN_FILENO, POLLIN, 0 };
    unsigned char c;
    if (poll(&p, 1, 50) <= 0 || read(STDIN_FILENO, &c, 1) != 1) return -1;
    return c;
}

StepKey keys_read(int raw) {
    if (!raw) { /* a line a key: its first character (the rest of a long line is dropped, not more keys) */
        int first = getchar(), c = first, length = 0;
        while (c != '\n' && c != EOF && length++ < STEP_LINE_MAX) c = getchar();
        if (c != '\n' && c != EOF) return KEY_NOT_KEYS;
        return first == EOF ? KEY_QUIT : key_of_char((unsigned char)first); /* end of input: nobody to ask */
    }
    unsigned char c;
    if (read(STDIN_FILENO, &c, 1) != 1) return KEY_QUIT;
    if (c >= 0xC0) { /* a UTF-8 character's lead byte (é, 日): its continuation bytes are the same key */
        int more = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1, b = 0x80;
        for (int i = 0; i < more && b >= 0x80 && b < 0xC0; i++) b = byte_soon();
        return KEY_OTHER;
    }
    if (c != 27) return key_of_char(c);
    /* An escape sequence, read to its end so that none of its bytes is
     * taken for a key: ESC [ or ESC O, parameters and intermediates (0x20-
     * 0x3F: "1;5" of Ctrl+Right's ESC [ 1 ; 5 C), then the final byte. The
     * arrows, with any modifier, move; anything else is not a key. */
    int introducer = byte_soon();
    if (introducer != '[' && introducer != 'O') return KEY_OTHER; /* Esc alone, or Alt+key */
    int b = byte_soon();
    for (int i = 0; i < 32 && b >= 0x20 && b <= 0x3F; i++) b = byte_soon();
    switch (b) {
    case 'A': return KEY_LAYER_PREV;
    case 'B': return KEY_LAYER_NEXT;
    case 'C': return KEY_HEAD_NEXT;
    case 'D': return KEY_HEAD_PREV;
    default: return KEY_OTHER;
    }
}
