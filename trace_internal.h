/* trace_internal.h — what trace.c (the tracer, its recorded steps),
 * trace_text.c (the text trace), step_view.c (step mode) and trace_json.c
 * (JSON Lines, the HTML page) share. Not part of the API. */
#ifndef QKV_TRACE_INTERNAL_H
#define QKV_TRACE_INTERNAL_H

#include "trace.h"
#include "output_file.h" /* the --html page */

/* What the observer captures, and what a step keeps                         */

/* The attention of the latest position, every layer and head, copied from
 * the run state right after forward() computed it. */
typedef struct {
    int n_layers, n_heads, seq_len, head_size;
    int n_visible;  /* keys seen: step_key_position gives their positions */
    int sinks, window_start; /* kv_window.h's view: keys 0..sinks-1, then window_start.. */
    float *scores;  /* [n_layers, n_heads, seq_len] raw q·k, in order of position */
    float *weights; /* [n_layers, n_heads, seq_len] softmax of the scaled scores */
    float *outputs; /* [n_layers, n_heads, head_size] each head's Σ weight · value */
} Capture;

typedef struct {
    int id;
    float logit;
    float prob;   /* softmax of the logits */
    float prob_t; /* softmax of the logits / temperature: what the sampler drew from */
} Candidate;

typedef struct {
    int pos, token, next;
    int forced;       /* next is the prompt's next token, not a sample */
    SampleInfo info;  /* how next was sampled (when not forced) */
    int n_visible;    /* keys seen: 0..n_visible-1 without a window */
    int sinks;        /* with --window: key i < sinks is position i (a sink), */
    int window_start; /*   key i >= sinks position window_start + i - sinks;
                           positions sinks..window_start-1 were evicted */
    float *attention; /* [2, n_layers, n_heads, n_visible]: scores, then weights,
                         then [n_layers, n_heads, head_size] the heads' outputs;
                         NULL once no output needs it */
    Candidate *top;   /* [n_top], largest logit first */
    int n_top;
} Step;

typedef struct {
    Step *steps;
    int n, cap;
} Recording;

struct Tracer {
    TraceOptions opt;
    const Model *model;
    const Tokenizer *tok;
    float temperature, topp;
    int topk;
    int wants_text;    /* a text trace: to stderr, or to --trace-out */
    FILE *text;        /* the text trace (stderr, or --trace-out once opened), or NULL */
    int colour;        /* ANSI heat colours in the text trace */
    FILE *json;        /* --trace-json once opened, or NULL */
    int streams_opened; /* --trace-out and --trace-json are opened at the first step (open_streams) */
    char stream_error[320]; /* why one of them could not be opened: reported at close */
    WholeFile html;    /* --html, opened early so a bad path fails early; renamed when complete */
    Model compare;     /* --compare, loaded early for the same reason */
    int has_compare;
    Capture capture;
    ForwardObserver observer;
    Recording run;
    int n_text_done;   /* steps whose text block is written (or skipped) */
    int n_released;    /* steps whose attention is freed (no output needs it) */
    TraceLevel level;  /* text trace: tables, or each head's top keys */
    int width;         /* characters per line of the text trace */
    int run_to_end;    /* step mode: the user pressed c, stop pausing */
    int not_keys;      /* step mode: stdin gave a line too long to be keys (tracer_close reports it) */
    int raw_keys;      /* step mode: the terminal gives one key at a time */
    int focus_layer, focus_head; /* step mode: the head whose table is shown */
    int layer_weights; /* step mode: the chosen layer's heads side by side (a) */
    int matrix_view;   /* step mode: the chosen head's last queries as a matrix's rows (m) */
    int out_of_memory; /* a step could not be recorded: reported at close */
    float *probs;      /* [vocab_size] scratch */
};

/* trace.c */
int capture_init(Capture *cap, const Config *c);
void capture_free(Capture *cap);
void capture_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s);
const float *step_scores(const Step *st, const Capture *cap, int layer, int head);
const float *step_weights(const Step *st, const Capture *cap, int layer, int head);
/* The head's output, Σ weight · value: head_size numbers */
const float *step_output(const Step *st, const Capture *cap, int layer, int head);
/* The position of a step's key i (kv_view_position's; i >= n_visible: the
 * later positions of a prompt, masked). */
int step_key_position(const Step *st, int i);
/* Whether the step's sampled next token ended the text (not a prompt step's) */
int step_ends_text(const Tracer *tr, const Step *st);
/* The key index of position pos in st's keys, or -1 if st does not hold it
 * (later than its query, or evicted from its window) */
int step_key_index(const Step *st, int pos);
/* The share of a head's weight on the sinks (0 without any). */
double step_sink_share(const Step *st, const Capture *cap, int layer, int head);
Step *record_step(Recording *rec, const Capture *cap, int pos, int token, const float *logits, int vocab,
                  int n_top, float temperature, float *probs);
void recording_free(Recording *rec);
/* --pos A-B: whether the text and JSON show position pos */
int pos_selected(const Tracer *tr, int pos);

/* trace_text.c */
#define LABEL_BYTES 64 /* room for an escaped, cut key label */
/* Each key's column label (the tokens of the step's key positions: 0..n_cols-1
 * without a window). */
typedef struct {
    char (*text)[LABEL_BYTES];
    const char **ptrs;
    int *positions; /* [n_cols] each column's key position */
} Labels;
int labels_make(Labels *lb, const Tracer *tr, const Step *st, int n_cols);
void labels_free(Labels *lb);
/* Colour only for a terminal, and never when NO_COLOR is set */
int wants_colour(FILE *f);
/* Characters per line: a terminal's width; a file or a pipe's is fixed */
int output_width(FILE *f);
/* A terminal's rows (0 for a file or a pipe, or when it does not say) */
int output_rows(FILE *f);
const char *method_name(SampleMethod m);
/* The pieces of a step's text block and of step mode's view */
void print_step_header(FILE *out, int width, const Tracer *tr, const Step *st);
void print_mask_note(FILE *out, int width, const Step *st, int n_cols);
/* a head's table; one_block: only the keys of one block with the most
 * weight (a step view short of rows), with a note. 0, or -1 out of memory */
int print_head_table(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h, int n_cols,
                     const Labels *lb, int colour, int one_block);
void print_head_summary(FILE *out, int width, const Tracer *tr, const Step *st, int l, int h, const Labels *lb,
                        int mark);
/* Step mode keeps the attention of this many of the last steps: the rows
 * of m's matrix */
#define STEP_MATRIX_ROWS 12
/* Step mode's m: the chosen head's weights in the last steps' rows (few:
 * half as many), the latest keys in columns, the causal mask's cells
 * marked. Returns 0 (as the other tables, which can run out of memory) */
int print_head_matrix(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb, int colour, int few);
int print_layer_weights(FILE *out, int width, const Tracer *tr, const Step *st, const Labels *lb, int colour,
                        int one_block);
/* "  (note)" wrapped to width: its own line breaks where they fit */
int display_width(const char *s); /* columns on screen: a CJK character takes two */
int escape_length(const char *p);  /* bytes of piece_escape's escape at p */
void print_wrapped(FILE *out, int width, const char *text);
/* the next tokens; one_line: as many as fit one line */
void print_next_summary(FILE *out, int width, const Tracer *tr, const Step *st, int one_line);
void print_sampling(FILE *out, int width, const Tracer *tr, const Step *st);
/* Writes the text blocks of the recorded steps that can be written now
 * (at_close: the prompt's too); -1 when out of memory */
int write_pending_text(Tracer *tr, int at_close);

/* trace_json.c */
/* One step as a line of --trace-json (narrowed by --layer and --head). */
void write_json_line(const Tracer *tr, const Step *st);
/* The --html page: the run, and the --compare model over the same tokens.
 * Returns 0, or -1 with err filled. */
int write_html(Tracer *tr, char *err, size_t err_len);

#endif
