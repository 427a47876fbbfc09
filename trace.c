/* trace.c — watching the real forward pass (see trace.h): the capture, the
 * recorded steps and the tracer's life.
 *
 * How it works: the tracer is a ForwardObserver. After each layer's attention,
 * forward() calls capture_attention(), which copies the raw scores and the
 * softmax weights of every head out of the run state. When the step's logits
 * are known, run.c calls tracer_step(), which freezes the capture into a Step
 * and writes it out: a JSON line at once, a text block (prompt rows wait for
 * the end of the prompt, so they can show later prompt keys as masked), and,
 * for the HTML page, the Step stays in memory until tracer_close().
 * The text trace is written by trace_text.c, JSON and the HTML page by
 * trace_json.c; step mode's view is step_view.c's, its keys stepper.c's.
 *
 * Nothing here computes attention: every number is the one forward() used.
 * The --compare model runs through the same forward() with the same observer.
 */
#include "trace.h"
#include "stepper.h"
#include "trace_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Capture                                                                   */

int capture_init(Capture *cap, const Config *c) {
    size_t n = (size_t)c->n_layers * c->n_heads * c->seq_len;
    cap->n_layers = c->n_layers;
    cap->n_heads = c->n_heads;
    cap->seq_len = c->seq_len;
    cap->head_size = c->head_size;
    cap->n_visible = 0;
    cap->scores = calloc(n, sizeof(float));
    cap->weights = calloc(n, sizeof(float));
    cap->outputs = calloc((size_t)c->n_layers * c->n_heads * c->head_size, sizeof(float));
    return cap->scores && cap->weights && cap->outputs ? 0 : -1;
}

void capture_free(Capture *cap) {
    free(cap->scores);
    free(cap->weights);
    free(cap->outputs);
    cap->scores = cap->weights = cap->outputs = NULL;
}

/* The ForwardObserver callback: row h of the run state is at h*capacity,
 * by cache slot; the capture keeps the keys in order of position, and the
 * heads' outputs as they are. */
void capture_attention(void *ctx, int layer, int pos, int n_visible, const RunState *s) {
    Capture *cap = ctx;
    const KVCache *kv = &s->kv_cache;
    for (int h = 0; h < cap->n_heads; h++) {
        const float *scores = s->attention_scores + (size_t)h * kv->capacity;
        const float *weights = s->attention_weights + (size_t)h * kv->capacity;
        size_t to = ((size_t)layer * cap->n_heads + h) * cap->seq_len;
        for (int i = 0; i < n_visible; i++) {
            int slot = kv_slot(kv, kv_view_position(kv, pos, i));
            cap->scores[to + i] = scores[slot];
            cap->weights[to + i] = weights[slot];
        }
    }
    size_t outputs = (size_t)cap->n_heads * cap->head_size;
    memcpy(cap->outputs + layer * outputs, s->attention_output, outputs * sizeof(float));
    cap->n_visible = n_visible;
    cap->sinks = kv->sinks < n_visible ? kv->sinks : n_visible;
    cap->window_start = pos + 1 - (n_visible - cap->sinks); /* kv_window_start, or sinks while none is evicted */
}

/* ------------------------------------------------------------------------ */
/* Steps                                                                     */

const float *step_scores(const Step *st, const Capture *cap, int layer, int head) {
    return st->attention + ((size_t)layer * cap->n_heads + head) * st->n_visible;
}

const float *step_weights(const Step *st, const Capture *cap, int layer, int head) {
    return step_scores(st, cap, layer, head) + (size_t)cap->n_layers * cap->n_heads * st->n_visible;
}

const float *step_output(const Step *st, const Capture *cap, int layer, int head) {
    size_t per_head = (size_t)cap->n_layers * cap->n_heads * st->n_visible;
    return st->attention + 2 * per_head + ((size_t)layer * cap->n_heads + head) * cap->head_size;
}

int step_key_position(const Step *st, int i) { return i < st->sinks ? i : st->window_start + i - st->sinks; }

int step_ends_text(const Tracer *tr, const Step *st) { return !st->forced && tokenizer_ends_text(tr->tok, st->next); }

int step_key_index(const Step *st, int pos) {
    int i = pos < st->sinks ? pos : pos < st->window_start ? -1 : pos - st->window_start + st->sinks;
    return i >= 0 && i < st->n_visible ? i : -1;
}

double step_sink_share(const Step *st, const Capture *cap, int layer, int head) {
    const float *w = step_weights(st, cap, layer, head);
    double share = 0;
    for (int i = 0; i < st->sinks; i++) share += w[i];
    return share;
}

/* The n largest logits, largest first, with their probabilities at
 * temperature 1 and at the sampling temperature (greedy, temperature 0,
 * keeps those of 1). probs is [vocab] scratch for model.h's softmax, the one
 * sample() uses. */
static void top_candidates(Candidate *top, int n, const float *logits, int vocab, float temperature,
                           float *probs) {
    int count = 0;
    for (int i = 0; i < vocab; i++) {
        if (count == n && logits[i] <= top[n - 1].logit) continue;
        int j = count < n ? count++ : n - 1; /* insertion into the kept n, in order */
        while (j > 0 && top[j - 1].logit < logits[i]) { top[j] = top[j - 1]; j--; }
        top[j] = (Candidate){ i, logits[i], 0.0f, 0.0f };
    }
    memcpy(probs, logits, (size_t)vocab * sizeof(float));
    softmax(probs, vocab);
    for (int j = 0; j < n; j++) top[j].prob = top[j].prob_t = probs[top[j].id];
    if (temperature > 0.0f && temperature != 1.0f) {
        memcpy(probs, logits, (size_t)vocab * sizeof(float));
        softmax_at_temperature(probs, vocab, temperature); /* the sampler's p@T, its T -> 0 limit too */
        for (int j = 0; j < n; j++) top[j].prob_t = probs[top[j].id];
    }
}

/* Freezes the capture and the logits into a new step of rec. */
Step *record_step(Recording *rec, const Capture *cap, int pos, int token, const float *logits,
                         int vocab, int n_top, float temperature, float *probs) {
    if (rec->n == rec->cap) {
        int cap_steps = rec->cap ? 2 * rec->cap : 64;
        Step *grown = realloc(rec->steps, (size_t)cap_steps * sizeof(Step));
        if (!grown) return NULL;
        rec->steps = grown;
        rec->cap = cap_steps;
    }
    Step *st = &rec->steps[rec->n];
    memset(st, 0, sizeof *st);
    st->pos = pos;
    st->token = token;
    st->n_visible = cap->n_visible;
    st->sinks = cap->sinks;
    st->window_start = cap->window_start;
    if (n_top > vocab) n_top = vocab;
    size_t per_head = (size_t)cap->n_layers * cap->n_heads * st->n_visible;
    size_t outputs = (size_t)cap->n_layers * cap->n_heads * cap->head_size;
    st->attention = malloc((2 * per_head + outputs) * sizeof(float));
    st->top = malloc((size_t)n_top * sizeof(Candidate));
    if (!st->attention || !st->top) {
        free(st->attention);
        free(st->top);
        return NULL;
    }
    for (int l = 0; l < cap->n_layers; l++)
        for (int h = 0; h < cap->n_heads; h++) {
            size_t from = ((size_t)l * cap->n_heads + h) * cap->seq_len;
            size_t to = ((size_t)l * cap->n_heads + h) * st->n_visible;
            memcpy(st->attention + to, cap->scores + from, (size_t)st->n_visible * sizeof(float));
            memcpy(st->attention + per_head + to, cap->weights + from, (size_t)st->n_visible * sizeof(float));
        }
    memcpy(st->attention + 2 * per_head, cap->outputs, outputs * sizeof(float));
    st->n_top = n_top;
    top_candidates(st->top, n_top, logits, vocab, temperature, probs);
    rec->n++;
    return st;
}

static void step_release(Step *st) {
    free(st->attention);
    free(st->top);
    st->attention = NULL;
    st->top = NULL;
}

void recording_free(Recording *rec) {
    for (int i = 0; i < rec->n; i++) step_release(&rec->steps[i]);
    free(rec->steps);
    memset(rec, 0, sizeof *rec);
}

int trace_level_parse(const char *name) {
    if (!strcmp(name, "full")) return TRACE_FULL;
    if (!strcmp(name, "summary")) return TRACE_SUMMARY;
    return -1;
}

/* --pos A-B */
int pos_selected(const Tracer *tr, int pos) { return pos >= tr->opt.pos[0] && pos <= tr->opt.pos[1]; }

/* ------------------------------------------------------------------------ */
/* The tracer's life                                                         */

/* The page is written whole (output_file.h), so a run that fails (a bad
 * --compare model, an error while generating) leaves neither a page nor an
 * empty file behind. */
static int finish_html(Tracer *tr, char *err, size_t err_len) {
    int rc = write_html(tr, err, err_len);
    return rc == 0 ? whole_file_commit(&tr->html, err, err_len) : rc;
}

static int check_selection(const char *flag, int value, int count, const char *noun, char *err, size_t err_len) {
    if (value < count) return 0;
    snprintf(err, err_len, "%s %d: the model has %d %s (0..%d)", flag, value, count, noun, count - 1);
    return -1;
}

/* A compare model with a tokenizer inside must have the model's: the same
 * kind, pieces and start and end tokens (the compare model is given the
 * model's token ids). 0, or -1 with why in err. */
static int check_compare_tokenizer(const Tracer *tr, char *err, size_t err_len) {
    const Config *c = &tr->compare.config;
    Tokenizer other;
    char why[256], mine[40], theirs[40];
    if (!tr->compare.tokenizer_data) return 0; /* a llama2.c file: the run's tokenizer is its own */
    if (tokenizer_load_kind(&other, tr->compare.tokenizer_data, tr->compare.tokenizer_bytes, c->vocab_size,
                            c->tokenizer_kind, why, sizeof why)) {
        snprintf(err, err_len, "--compare %s: %s", tr->opt.compare_path, why);
        return -1;
    }
    other.bos_id = c->bos_id; /* as load_tokenizer (run.c) sets the model's */
    other.eos_id = c->eos_id;
    int rc = -1, differs = tokenizer_first_difference(&other, tr->tok);
    if (other.kind != tr->tok->kind)
        snprintf(err, err_len, "--compare %s: its tokenizer is of another kind than the model's; they must share a "
                 "tokenizer", tr->opt.compare_path);
    else if (differs >= 0) {
        piece_escape(mine, sizeof mine, tr->tok->vocab[differs], tr->tok->piece_lengths[differs], 1);
        piece_escape(theirs, sizeof theirs, other.vocab[differs], other.piece_lengths[differs], 1);
        snprintf(err, err_len, "--compare %s: its tokenizer is not the model's (token %d is \"%s\" there, \"%s\" here); "
                 "they must share a tokenizer", tr->opt.compare_path, differs, theirs, mine);
    } else if (c->bos_id != tr->model->config.bos_id || c->eos_id != tr->model->config.eos_id)
        snprintf(err, err_len, "--compare %s: its start and end tokens are %d and %d, the model's %d and %d; "
                 "they must share a tokenizer", tr->opt.compare_path, c->bos_id, c->eos_id,
                 tr->model->config.bos_id, tr->model->config.eos_id);
    else rc = 0;
    tokenizer_free(&other);
    return rc;
}

/* The compare model must read the same token ids: same vocabulary size,
 * and the same tokenizer where it has one inside. */
static int load_compare(Tracer *tr, char *err, size_t err_len) {
    char why[256];
    if (model_load(&tr->compare, tr->opt.compare_path, why, sizeof why)) {
        snprintf(err, err_len, "--compare: %s", why);
        return -1;
    }
    tr->has_compare = 1;
    if (tr->compare.config.vocab_size != tr->model->config.vocab_size) {
        snprintf(err, err_len, "--compare %s: vocabulary of %d tokens, the model has %d; they must share a tokenizer",
                 tr->opt.compare_path, tr->compare.config.vocab_size, tr->model->config.vocab_size);
        return -1;
    }
    return check_compare_tokenizer(tr, err, err_len);
}

static void tracer_free(Tracer *tr) {
    if (tr->raw_keys) keys_restore();
    if (tr->text) fclose(tr->text);
    if (tr->json) fclose(tr->json);
    whole_file_abandon(&tr->html); /* still open: the page was never completed */
    if (tr->has_compare) model_free(&tr->compare);
    capture_free(&tr->capture);
    recording_free(&tr->run);
    free(tr->probs);
    free(tr);
}

int tracer_max_positions(const Tracer *tr, int steps) {
    int most = tr && tr->has_compare ? tr->compare.config.seq_len : steps;
    return steps < most ? steps : most;
}

/* What can refuse the run, checked before any output file is opened: the
 * --compare model (and a prompt longer than its context): -1; --pos against
 * the positions the run can reach, and where it narrows only a text trace
 * (text; the JSON has prompt rows) without --trace-prompt against the
 * prompt's (a trace of nothing would pass silently): 1 */
static int check_run(Tracer *tr, int text, char *err, size_t err_len) {
    const TraceOptions *o = &tr->opt;
    if (o->compare_path && load_compare(tr, err, err_len)) return -1;
    if (tr->has_compare && o->prompt_tokens > tr->compare.config.seq_len) {
        snprintf(err, err_len, "the prompt is %d tokens, longer than the --compare model's context of %d",
                 o->prompt_tokens, tr->compare.config.seq_len);
        return -1;
    }
    int positions = tracer_max_positions(tr, o->positions);
    if (positions > 0 && o->pos[0] >= positions) {
        snprintf(err, err_len, "--pos %d: the run's positions are 0..%d (-n, the context%s)", o->pos[0],
                 positions - 1, tr->has_compare ? ", --compare's context" : "");
        return 1;
    }
    /* the step at the prompt's last position samples the first new token:
     * the ones before it are prompt rows, which the text shows on request */
    if (text && !o->json_path && !o->trace_prompt && o->pos[1] < o->prompt_tokens - 1) {
        char range[32];
        snprintf(range, sizeof range, o->pos[0] == o->pos[1] ? "%d" : "%d-%d", o->pos[0], o->pos[1]);
        snprintf(err, err_len, "--pos %s: only prompt rows (0..%d; the first new token is sampled at %d), which the "
                 "text trace shows with --trace-prompt", range, o->prompt_tokens - 2, o->prompt_tokens - 1);
        return 1;
    }
    return 0;
}

/* Weights (and as many scores) an --html page holds and still opens in a
 * few seconds: about 20 bytes each as JSON. Measured in headless Chromium,
 * AMD EPYC, from the page's start to its first view drawn: llama2.c's
 * 15M shape (36 heads) over 256 positions, 1.2 M weights, 23.5 MB, 2.0-2.2 s. */
#define HTML_QUICK_WEIGHTS 4e6

/* Positions over which a page's pictures (N x N cells a head, 4 bytes
 * each: 64 MiB at 4,096) slow it whatever its data: a --window run's rows
 * are short, its pictures are not */
#define HTML_QUICK_POSITIONS 4096

/* The cells of the pictures the page keeps drawn (explorer.html's
 * cachedPicture): past them a click draws every picture of the layer again,
 * 2-3 s each at 4,000 positions of 4 heads (headless Chromium, AMD EPYC) */
#define HTML_PICTURE_CELLS 64e6

/* The heads an --html page shows: the model's, and the --compare model's
 * (of its own shape) */
static int page_heads(const Tracer *tr, const Config *c) {
    const Config *other = &tr->compare.config;
    return c->n_layers * c->n_heads + (tr->has_compare ? other->n_layers * other->n_heads : 0);
}

/* The weights an --html page of positions holds: each head's row i has
 * min(i + 1, W) of them (W: the --window, else every key) */
static double page_weights(const Tracer *tr, const Config *c, int positions) {
    double n = positions, w = tr->opt.window > 0 && tr->opt.window < positions ? tr->opt.window : n;
    return (w * (w + 1) / 2 + (n - w) * w) * page_heads(tr, c);
}

/* The cells of the pictures one layer of a page of positions shows: each
 * model's matrix and its heads' thumbnails, N x N each */
static double page_layer_cells(const Tracer *tr, const Config *c, int positions) {
    int pictures = c->n_heads + 1 + (tr->has_compare ? tr->compare.config.n_heads + 1 : 0);
    return (double)pictures * positions * positions;
}

static int records(const Tracer *tr) { return tr->wants_text || tr->opt.json_path || tr->html.f || tr->opt.step; }

/* The streamed outputs, --trace-out and --trace-json, opened at the first
 * step, so a run refused before it (NaN logits at position 0, an empty
 * text) leaves a file already there as it was (every path was checked at
 * the start: options.c); then the text trace's form, which depends on
 * where it goes. -1 with stream_error if one cannot be opened. */
static int open_streams(Tracer *tr) {
    if (tr->streams_opened) return tr->stream_error[0] ? -1 : 0;
    tr->streams_opened = 1;
    const TraceOptions *o = &tr->opt;
    char *err = tr->stream_error;
    size_t len = sizeof tr->stream_error;
    if (tr->wants_text && o->out_path && !(tr->text = output_open(o->out_path, "trace output", err, len))) return -1;
    if (o->json_path && !(tr->json = output_open(o->json_path, "trace JSON", err, len))) return -1;
    int one_head = o->layer >= 0 && o->head >= 0;
    tr->colour = tr->text && wants_colour(tr->text);
    tr->width = output_width(tr->text ? tr->text : stderr);
    tr->level = o->level_name ? (TraceLevel)trace_level_parse(o->level_name)
                : tr->text && isatty(fileno(tr->text)) && !one_head ? TRACE_SUMMARY : TRACE_FULL;
    return 0;
}

Tracer *tracer_open(const TraceOptions *o, const Model *m, const Tokenizer *t,
                    float temperature, float topp, int topk, char *err, size_t err_len, int *bad_flag) {
    if (err_len) err[0] = '\0';
    *bad_flag = 0;
    int text = o->trace || o->trace_prompt || o->out_path;
    if (!text && !o->json_path && !o->html_path && !o->step) return NULL;
    const Config *c = &m->config;
    if ((o->layer >= 0 && check_selection("--layer", o->layer, c->n_layers, "layers", err, err_len)) ||
        (o->head >= 0 && check_selection("--head", o->head, c->n_heads, "heads", err, err_len))) {
        *bad_flag = 1;
        return NULL;
    }
    Tracer *tr = calloc(1, sizeof *tr);
    if (!tr) { snprintf(err, err_len, "out of memory for the tracer"); return NULL; }
    tr->opt = *o;
    if (tr->opt.top_logits <= 0) tr->opt.top_logits = 10;
    tr->model = m;
    tr->tok = t;
    tr->temperature = temperature;
    tr->topp = topp;
    tr->topk = topk;
    tr->focus_layer = o->layer >= 0 ? o->layer : 0;
    tr->focus_head = o->head >= 0 ? o->head : 0;
    /* step mode shows its own view on stderr: a text trace goes to a file */
    if (o->step && !o->out_path) text = 0;
    int refusal = check_run(tr, text, err, err_len), failed = refusal != 0;
    *bad_flag = refusal > 0;
    tr->wants_text = text;
    if (text && !o->out_path && !failed && !(tr->text = output_descriptor(STDERR_FILENO))) {
        snprintf(err, err_len, "cannot write the trace to stderr: %s", strerror(errno));
        failed = 1;
    }
    if (!failed && o->html_path) failed |= whole_file_open(&tr->html, o->html_path, "--html", err, err_len) != 0;
    int page_positions = tracer_max_positions(tr, o->positions);
    double weights = page_weights(tr, c, page_positions);
    int redrawn = page_layer_cells(tr, c, page_positions) > HTML_PICTURE_CELLS;
    if (!failed && o->html_path && (weights > HTML_QUICK_WEIGHTS || page_positions > HTML_QUICK_POSITIONS || redrawn))
        fprintf(stderr, "warning: --html of %d positions of %d heads: the page holds %.1f million weights "
                        "(about %.0f MB) and draws pictures of %d x %d cells, slow to open%s (-n fewer)\n",
                page_positions, page_heads(tr, c), weights * 1e-6, weights * 20e-6, page_positions, page_positions,
                redrawn ? " and to click (more than it keeps drawn: each click draws a layer's again)" : "");
    if (!failed && records(tr)) {
        tr->probs = malloc((size_t)c->vocab_size * sizeof(float));
        if (!tr->probs || capture_init(&tr->capture, c)) {
            snprintf(err, err_len, "out of memory for the tracer");
            failed = 1;
        }
        tr->observer = (ForwardObserver){ &tr->capture, capture_attention, NULL };
    }
    if (failed) {
        tracer_free(tr);
        return NULL;
    }
    if (o->step) tr->raw_keys = keys_raw_mode();
    return tr;
}

const ForwardObserver *tracer_observer(Tracer *tr) {
    return tr && records(tr) ? &tr->observer : NULL;
}

/* Every recorded output needs the prompt's tokens (the key labels) and the
 * JSON and HTML need its rows, so the prompt runs one position at a time.
 * That only adds the classifier of each prompt position. */
int tracer_wants_prompt(const Tracer *tr) { return tr && records(tr); }

/* Drops the attention of steps no output will read again: all of them
 * unless the HTML page is coming, except prompt rows still waiting for
 * their text block and step mode's last STEP_MATRIX_ROWS (m's matrix).
 * Their tokens stay, as key labels. */
static void release_written(Tracer *tr) {
    if (tr->html.f) return;
    int done = tr->wants_text ? tr->n_text_done : tr->run.n;
    if (tr->opt.step && done > tr->run.n - STEP_MATRIX_ROWS) done = tr->run.n - STEP_MATRIX_ROWS; /* the step view's */
    for (; tr->n_released < done; tr->n_released++) step_release(&tr->run.steps[tr->n_released]);
}

void tracer_step(Tracer *tr, int pos, int token, const float *logits, int next, const SampleInfo *info) {
    if (!tr || !records(tr) || tr->out_of_memory) return;
    const Config *c = &tr->model->config;
    Step *st = record_step(&tr->run, &tr->capture, pos, token, logits, c->vocab_size, tr->opt.top_logits,
                           tr->temperature, tr->probs);
    if (!st) {
        tr->out_of_memory = 1;
        return;
    }
    st->next = next;
    st->forced = info == NULL;
    if (info) st->info = *info;
    if (open_streams(tr)) return; /* reported at close; the steps wait */
    if (tr->json && pos_selected(tr, pos)) write_json_line(tr, st);
    if (tr->text && write_pending_text(tr, 0)) tr->out_of_memory = 1;
    release_written(tr);
}

void tracer_discard(Tracer *tr) {
    if (tr) tracer_free(tr);
}

int tracer_close(Tracer *tr, char *err, size_t err_len) {
    if (!tr) return 0;
    if (err_len) err[0] = '\0';
    int rc = 0;
    if (tr->out_of_memory) {
        snprintf(err, err_len, "out of memory while tracing at position %d", tr->run.n);
        rc = -1;
    }
    if (rc == 0 && open_streams(tr)) { /* opened here if no step came */
        snprintf(err, err_len, "%s", tr->stream_error);
        rc = -1;
    }
    if (rc == 0 && tr->text && tr->run.n > 0 && write_pending_text(tr, 1)) {
        snprintf(err, err_len, "out of memory writing the trace");
        rc = -1;
    }
    if (rc == 0 && tr->html.f) rc = finish_html(tr, err, err_len);
    if (rc == 0 && tr->not_keys) { /* the outputs are whole: the run stopped as if q had been pressed */
        snprintf(err, err_len, "stdin: a line of more than %d bytes: step mode reads one key a line", STEP_LINE_MAX);
        rc = -1;
    }
    /* the streamed files' close tells whether every write went */
    if (tr->json) rc = output_close(tr->json, tr->opt.json_path, rc, err, err_len);
    if (tr->text && tr->opt.out_path) rc = output_close(tr->text, tr->opt.out_path, rc, err, err_len);
    /* the text trace on stderr, or step mode's view: a full disk, and no line can say so */
    int failed = tr->text && !tr->opt.out_path ? ferror(tr->text) | (fclose(tr->text) != 0)
                                               : tr->opt.step && (fflush(stderr) || ferror(stderr));
    if (failed && rc == 0) {
        snprintf(err, err_len, "cannot write the trace to stderr: a write failed");
        rc = -1;
    }
    tr->json = tr->text = NULL;
    tracer_free(tr);
    return rc;
}
