/* Optional C accelerator for the nccl-tests text parser and the nccl-report JSON writer (issue 17).
 *
 * Everything here mirrors Python code in parser.py, rowstore.py, transport.py and
 * commands/nccl_report.py, and declines (hands the line back to Python) whenever a line is not one
 * of the plain, common cases it was written for, so that the output is byte-identical with or without
 * it.  Only str blocks of the 1-byte kind (latin-1, in practice ASCII) are scanned; a line holding any
 * non-ASCII character is always handed back.
 *
 *   scan(block, pos, state, spec, messages, channels) -> (kind, start, end, next, info_lines, gdr, host)
 *       Handles the lines of ``block`` from ``pos`` on, as TextParser.feed would (with no interleaved
 *       runs and no pending row fragment): result rows (the _FastRow path), NCCL INFO lines (counted;
 *       channel lines ``... via NET/<net>/<n>`` gathered as _read_gdr would: the networks into
 *       ``channels``, the GDRDMA / other connections counted in gdr and host; the other messages that
 *       transport.read_message may use are appended to ``messages``), ``#  Rank`` lines, and lines that
 *       feed ignores.  Stops at the first line it does not handle, with that line's [start, end) and the
 *       position of the next line: kind 1 for a line feed() decides, kind 2 for a failure line (the
 *       "failure" or "timeout" of feed's _on_failure; no NCCL message), kind 3 + i for a line whose
 *       first word is WORDS[i] (no NCCL message, no failure): the parser calls the handlers of that line
 *       kind directly. Kind 0 at the end of the block; kind -1 (nothing done) when the block is not a
 *       1-byte-kind str.
 *   WORDS: the first words of kind 3 + i, in order.
 *   next_line(block, pos) -> (start, end, next) with str.splitlines' line breaks; None past the end or
 *       when the block is not a 1-byte-kind str.
 *   format_rows(records, names) -> str
 *       The JSON text of packed RowStore records, as nccl_report._rows_json writes them, joined by ",\n".
 *   first_unprintable(records, element, redop_ok, scale, ranks) -> (index, scale)
 *       The first packed record nccl-tests cannot have printed, as consistency._first_unprintable finds it.
 *   float_repr(x) -> str: repr(x), through the fast path when it applies (for the tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* rowstore._RECORD = struct.Struct("<qqqBHH10d") */
#define REC_SIZE 109
#define OFF_DOUBLES 29
#define MAX_TOKENS 64

/* math.nan's bits (struct.pack of the Python fallback writes these) */
static double py_nan(void) {
    const uint64_t bits = 0x7ff8000000000000ULL;
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

static PyObject *str_fast, *str_run, *str_rows, *str_buffer, *str_count, *str_wrong_rows, *str_busbw_sum,
    *str_busbw_count, *str_names, *str_index, *str_spill, *str_last_size, *str_repeated_size, *str_max_rank,
    *str_rank_pids, *str_rank_hosts, *str_interleaved, *str_question;

/* ---------------------------------------------------------------------------------------------------- */
/* Character classes (ASCII; str.isspace / regex \s, \d, \w restricted to ASCII)                          */

static unsigned char WS[256];
static inline int is_ws(unsigned char c) { return WS[c]; }
static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static inline int is_word(unsigned char c) {
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
/* str.splitlines() breaks, for the 1-byte kind: \n \r (\r\n) \v \f \x1c \x1d \x1e \x85 */
static inline int is_break(unsigned char c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85;
}

/* parser._LAUNCH_WORDS: one of them is in every line a launcher (mpirun, prterun, srun, slurmstepd) prints when a
 * rank of its job failed; such a line goes back to Python (_on_other), which reads it. Only other text is looked at,
 * not the rows or the NCCL lines, so the search costs nothing where the time goes. */
static const char *const LAUNCH_WORDS[] = {"mpirun", "prterun", "Primary job", "srun: error", "CANCELLED"};

static int launch_word(const unsigned char *s, Py_ssize_t n) {
    for (size_t w = 0; w < sizeof(LAUNCH_WORDS) / sizeof(LAUNCH_WORDS[0]); w++) {
        if (memmem(s, (size_t)n, LAUNCH_WORDS[w], strlen(LAUNCH_WORDS[w])) != NULL) return 1;
    }
    return 0;
}

static inline int starts(const unsigned char *s, Py_ssize_t n, const char *lit) {
    size_t k = strlen(lit);
    return (size_t)n >= k && memcmp(s, lit, k) == 0;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Numbers: exactly Python's float() / int() on the strict forms accepted here, or decline (0)            */

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* float(token) for [+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?; 0 for anything else (Python decides). */
static int parse_double(const unsigned char *s, Py_ssize_t n, double *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    if (n <= 0 || n > 60) return 0;
    if (s[0] == '+' || s[0] == '-') {
        neg = s[0] == '-';
        i = 1;
    }
    uint64_t mant = 0;
    int sig = 0, digits = 0, frac = 0, dropped = 0;
    while (i < n && is_digit(s[i])) {
        digits++;
        if (mant || s[i] != '0') {
            if (sig < 19) mant = mant * 10 + (uint64_t)(s[i] - '0');
            else dropped = 1;
            sig++;
        }
        i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit(s[i])) {
            digits++;
            frac++;
            if (mant || s[i] != '0') {
                if (sig < 19) mant = mant * 10 + (uint64_t)(s[i] - '0');
                else dropped = 1;
                sig++;
            }
            i++;
        }
    }
    if (digits == 0) return 0;
    long exp10 = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0, edigits = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) {
            eneg = s[i] == '-';
            i++;
        }
        while (i < n && is_digit(s[i])) {
            if (exp10 < 100000) exp10 = exp10 * 10 + (s[i] - '0');
            edigits++;
            i++;
        }
        if (edigits == 0) return 0;
        if (eneg) exp10 = -exp10;
    }
    if (i != n) return 0;
    long e = exp10 - frac;
    double value;
    if (mant == 0) {
        value = 0.0;
    } else if (!dropped && sig <= 15 && e >= -22 && e <= 22) {
        /* Clinger's fast path: both operands exact, one correctly rounded operation. */
        value = e >= 0 ? (double)mant * POW10[e] : (double)mant / POW10[-e];
    } else {
        char buffer[64];
        memcpy(buffer, s, (size_t)n);
        buffer[n] = '\0';
        char *end = NULL;
        value = PyOS_string_to_double(buffer, &end, NULL);
        if (value == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (end != buffer + n) return 0;
        *out = value;
        return 1;
    }
    *out = neg ? -value : value;
    return 1;
}

/* int(token, 10) for [+-]?\d{1,18}; 0 for anything else. */
static int parse_int64(const unsigned char *s, Py_ssize_t n, long long *out) {
    Py_ssize_t i = 0;
    int neg = 0;
    if (n > 0 && (s[0] == '+' || s[0] == '-')) {
        neg = s[0] == '-';
        i = 1;
    }
    if (n - i < 1 || n - i > 18) return 0;
    long long v = 0;
    for (; i < n; i++) {
        if (!is_digit(s[i])) return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = neg ? -v : v;
    return 1;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Growable output buffer                                                                                */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline void buf_lit(Buf *b, const char *s, Py_ssize_t n) {
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
}
#define LIT(b, s) buf_lit((b), (s), (Py_ssize_t)(sizeof(s) - 1))

static int put_ll(char *out, long long v) {
    char tmp[24];
    int n = 0, len = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    return len;
}

/* repr(x) without dtoa for |x| in [1e-4, 1e15) with at most 15 significant digits: such a decimal is
 * the only one of <= 15 digits that reads back as x (DBL_DIG), so it is the shortest repr; the check
 * mant / 10**p == x is one correctly rounded division of exact values. Else dtoa, as float.__repr__. */
static int put_double(Buf *b, double x) {
    char *out = b->data + b->len;
    if (x == 0.0) {
        if (signbit(x)) {
            memcpy(out, "-0.0", 4);
            b->len += 4;
        } else {
            memcpy(out, "0.0", 3);
            b->len += 3;
        }
        return 0;
    }
    double a = fabs(x);
    if (a >= 1e-4 && a < 1e15) {
        for (int p = 0; p <= 19; p++) {
            double scaled = a * POW10[p];
            if (scaled >= 1e15) break;
            double m = nearbyint(scaled);
            if (m / POW10[p] == a) {
                uint64_t mi = (uint64_t)m;
                char digits[24];
                int n = 0, len = 0;
                do {
                    digits[n++] = (char)('0' + mi % 10);
                    mi /= 10;
                } while (mi);
                /* digits are reversed; pad to at least p + 1 digits (leading zeros of "0.000123") */
                while (n < p + 1) digits[n++] = '0';
                if (x < 0) out[len++] = '-';
                int k = n;
                while (k > p) out[len++] = digits[--k];
                out[len++] = '.';
                if (p == 0) {
                    out[len++] = '0';
                } else {
                    while (k > 0) out[len++] = digits[--k];
                }
                b->len += len;
                return 0;
            }
        }
    }
    char *text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) return -1;
    size_t n = strlen(text);
    if (n > 40) { /* cannot happen for a double; keep the reserve honest */
        PyMem_Free(text);
        PyErr_SetString(PyExc_ValueError, "float repr too long");
        return -1;
    }
    memcpy(out, text, n);
    b->len += (Py_ssize_t)n;
    PyMem_Free(text);
    return 0;
}

/* ---------------------------------------------------------------------------------------------------- */
/* Lines                                                                                                 */

static inline Py_ssize_t line_end(const unsigned char *d, Py_ssize_t pos, Py_ssize_t n, Py_ssize_t *next) {
    Py_ssize_t e = pos;
    while (e < n && !is_break(d[e])) e++;
    if (e < n) *next = (d[e] == '\r' && e + 1 < n && d[e + 1] == '\n') ? e + 2 : e + 1;
    else *next = n;
    return e;
}

/* What one pass over a line finds: its end, the start of the next line, whether it holds a non-ASCII
 * character, and where the substrings that feed() and read_message() test for occur. */
typedef struct {
    Py_ssize_t end, next;
    int nonascii;
    Py_ssize_t nccl;      /* first "NCCL", -1 none */
    int failure, timeout, perf;
    Py_ssize_t via, gdr;  /* last "via NET/", "GPU Direct RDMA", -1 none */
} LineInfo;

enum { C_NONE, C_BREAK, C_HIGH, C_N, C_F, C_T, C_US, C_V, C_G };
static unsigned char CLASS[256];

static void init_classes(void) {
    for (int c = 0; c < 256; c++) WS[c] = c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f);
    for (int i = 0x80; i < 256; i++) CLASS[i] = C_HIGH;
    CLASS['\n'] = CLASS['\r'] = CLASS[0x0b] = CLASS[0x0c] = CLASS[0x1c] = CLASS[0x1d] = CLASS[0x1e] = CLASS[0x85] = C_BREAK;
    CLASS['N'] = C_N;
    CLASS['f'] = C_F;
    CLASS['t'] = C_T;
    CLASS['_'] = C_US;
    CLASS['v'] = C_V;
    CLASS['G'] = C_G;
}

#define AT(lit) (n - i >= (Py_ssize_t)sizeof(lit) - 1 && memcmp(d + i, lit, sizeof(lit) - 1) == 0)

static void analyze(const unsigned char *d, Py_ssize_t pos, Py_ssize_t n, LineInfo *li) {
    li->nonascii = li->failure = li->timeout = li->perf = 0;
    li->nccl = li->via = li->gdr = -1;
    Py_ssize_t i = pos;
    for (; i < n; i++) {
#ifdef __SSE2__
        /* 16 bytes at a time while none is a control character, non-ASCII, or a first letter looked for */
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(d + i));
            __m128i hit = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)); /* signed: >= 0x80 too */
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('N')));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('f')));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('t')));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('_')));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('v')));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8('G')));
            int mask = _mm_movemask_epi8(hit);
            if (mask == 0) {
                i += 16;
                continue;
            }
            i += __builtin_ctz((unsigned)mask);
            break;
        }
        if (i >= n) break;
#endif
        unsigned char k = CLASS[d[i]];
        if (k == C_NONE) continue;
        switch (k) {
        case C_BREAK:
            goto done;
        case C_HIGH:
            li->nonascii = 1;
            break;
        case C_N:
            if (li->nccl < 0 && AT("NCCL")) li->nccl = i - pos;
            break;
        case C_F:
            if (AT("failure")) li->failure = 1;
            break;
        case C_T:
            if (AT("timeout")) li->timeout = 1;
            break;
        case C_US:
            if (AT("_perf")) li->perf = 1;
            break;
        case C_V:
            if (AT("via NET/")) li->via = i - pos;
            break;
        case C_G:
            if (AT("GPU Direct RDMA")) li->gdr = i - pos;
            break;
        }
    }
done:
    li->end = i;
    if (i < n) li->next = (d[i] == '\r' && i + 1 < n && d[i + 1] == '\n') ? i + 2 : i + 1;
    else li->next = n;
}
#undef AT

/* parser.MPI_TAG: ^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>: ; returns the length of the tag or 0 */
static Py_ssize_t mpi_tag(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    if (n < 1 || s[0] != '[') return 0;
    i = 1;
    if (i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i])) i++;
    if (i >= n || s[i] != ',') return 0;
    i++;
    if (i >= n || !is_digit(s[i])) return 0;
    while (i < n && is_digit(s[i])) i++;
    if (i >= n || s[i] != ']') return 0;
    i++;
    if (i >= n || s[i] != '<') return 0;
    i++;
    if (starts(s + i, n - i, "stdout>:") || starts(s + i, n - i, "stderr>:")) return i + 8;
    if (starts(s + i, n - i, "stddiag>:")) return i + 9;
    return 0;
}

/* lines._NCCL_TAG = \bNCCL (INFO|WARN|TRACE)\b ? : level 1 INFO, 2 WARN, 3 TRACE, 0 none; *at = where it starts,
 * *end = after */
static int nccl_tag(const unsigned char *s, Py_ssize_t n, Py_ssize_t from, Py_ssize_t *at, Py_ssize_t *end) {
    for (Py_ssize_t i = from; i + 5 <= n; i++) {
        if (s[i] != 'N' || memcmp(s + i, "NCCL ", 5) != 0) continue;
        if (i == 0 || !is_word(s[i - 1])) {
            Py_ssize_t j = i + 5;
            int level = 0;
            Py_ssize_t k = 0;
            if (starts(s + j, n - j, "INFO")) level = 1, k = 4;
            else if (starts(s + j, n - j, "WARN")) level = 2, k = 4;
            else if (starts(s + j, n - j, "TRACE")) level = 3, k = 5;
            if (level && (j + k == n || !is_word(s[j + k]))) {
                j += k;
                if (j < n && s[j] == ' ') j++;
                *at = i;
                *end = j;
                return level;
            }
        }
    }
    return 0;
}

/* lines._NCCL_PREFIX without its optional "file:line " part: where NCCL's "host:pid:tid [dev] " that ends right
 * before the tag at t starts (the host's first character), -1 when there is none. */
static Py_ssize_t nccl_prefix(const unsigned char *s, Py_ssize_t t) {
    Py_ssize_t i = t, d;
    if (i < 1 || s[--i] != ' ') return -1;
    if (i < 1 || s[--i] != ']') return -1;
    d = i;
    while (i > 0 && is_digit(s[i - 1])) i--;
    if (i == d || i < 1 || s[--i] != '[') return -1;
    if (i < 1 || s[--i] != ' ') return -1;
    for (int field = 0; field < 2; field++) { /* tid, then pid, each after a ':' */
        d = i;
        while (i > 0 && is_digit(s[i - 1])) i--;
        if (i == d || i < 1 || s[--i] != ':') return -1;
    }
    d = i;
    while (i > 0 && !is_ws(s[i - 1]) && s[i - 1] != ':') i--; /* the host: one character at least */
    return i == d ? -1 : i;
}

/* transport._read_gdr's _VIA_NET = \bvia NET/(?P<net>[^/]+)/\d+(?P<rest>\S*), searched in the message:
 * 1 found (net and whether rest holds GDRDMA), 0 not. */
static int via_net(const unsigned char *m, Py_ssize_t n, Py_ssize_t *net, Py_ssize_t *net_len, int *gdr) {
    for (Py_ssize_t p = 0; p + 8 <= n; p++) {
        if (m[p] != 'v' || memcmp(m + p, "via NET/", 8) != 0 || (p > 0 && is_word(m[p - 1]))) continue;
        Py_ssize_t j = p + 8, k = j;
        while (k < n && m[k] != '/') k++;
        if (k == j || k >= n) continue;
        Py_ssize_t d = k + 1, e = d;
        while (e < n && is_digit(m[e])) e++;
        if (e == d) continue;
        Py_ssize_t r = e;
        while (r < n && !is_ws(m[r])) r++;
        *net = j;
        *net_len = k - j;
        *gdr = 0;
        for (Py_ssize_t q = e; q + 6 <= r; q++)
            if (m[q] == 'G' && memcmp(m + q, "GDRDMA", 6) == 0) *gdr = 1;
        return 1;
    }
    return 0;
}

/* transport._MESSAGE_STARTS */
static int message_start(const unsigned char *m, Py_ssize_t n) {
    return starts(m, n, "Using network") || starts(m, n, "NET/IB") || starts(m, n, "NET/Socket") ||
           starts(m, n, "NET/Plugin") || starts(m, n, "NET/OFI Using aws-ofi-nccl") || starts(m, n, "NCCL") ||
           starts(m, n, "Failed to open libibverbs") || starts(m, n, "Failed to initialize NET plugin");
}

/* transport.read_message can only use messages that pass this test (a superset of its readers' patterns) */
static int message_relevant(const unsigned char *m, Py_ssize_t n, int via, int gdr) {
    return via || gdr || message_start(m, n);
}

/* ---------------------------------------------------------------------------------------------------- */
/* scan()                                                                                                */

typedef struct {
    /* layout (from _FastRow.spec) */
    int usable, width, halves;
    int n_extra;
    int extra_root[8]; /* 1: root column, 0: redop column */
    int out_at[5], in_at[5];
    double scale;
} Spec;

typedef struct {
    PyObject *state, *store; /* borrowed / owned(store) */
    int loaded;
    PyObject *buffer, *names, *index; /* owned */
    long long count, wrong_rows, busbw_count, last_size, repeated_size;
    int has_repeated; /* repeated_size was set in this call */
    double busbw_sum;
    int rows_added;
    Buf records;
    /* name cache: last type and redop tokens and their indices */
    char type_tok[64];
    Py_ssize_t type_len;
    long type_index;
    char redop_tok[64];
    Py_ssize_t redop_len;
    long redop_index;
    /* ranks */
    int ranks_loaded, ranks_usable;
    long long max_rank, max_rank_start;
    PyObject *rank_pids, *rank_hosts, *interleaved; /* owned */
    /* channel lines (via NET/...): the networks named, in order, and the GDR / host connection counts */
    PyObject *channels; /* borrowed */
    long long gdr, host;
    int queued_via; /* a message holding "via NET/" went to ``messages`` */
} Ctx;

static int parse_spec(PyObject *spec, Spec *out) {
    /* (usable, width, halves, extra_roots tuple, out_at tuple, in_at tuple, scale) */
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 7) {
        PyErr_SetString(PyExc_TypeError, "bad row spec");
        return -1;
    }
    out->usable = PyObject_IsTrue(PyTuple_GET_ITEM(spec, 0));
    out->width = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
    out->halves = (int)PyLong_AsLong(PyTuple_GET_ITEM(spec, 2));
    PyObject *extra = PyTuple_GET_ITEM(spec, 3);
    PyObject *out_at = PyTuple_GET_ITEM(spec, 4);
    PyObject *in_at = PyTuple_GET_ITEM(spec, 5);
    out->scale = PyFloat_AsDouble(PyTuple_GET_ITEM(spec, 6));
    if (PyErr_Occurred()) return -1;
    if (!PyTuple_Check(extra) || !PyTuple_Check(out_at) || !PyTuple_Check(in_at) || PyTuple_GET_SIZE(out_at) != 5 ||
        PyTuple_GET_SIZE(in_at) != 5) {
        PyErr_SetString(PyExc_TypeError, "bad row spec");
        return -1;
    }
    out->n_extra = (int)PyTuple_GET_SIZE(extra);
    if (out->n_extra > 8 || out->width > MAX_TOKENS || out->width < 3) out->usable = 0;
    for (int i = 0; i < out->n_extra && i < 8; i++) out->extra_root[i] = PyObject_IsTrue(PyTuple_GET_ITEM(extra, i));
    for (int i = 0; i < 5; i++) {
        out->out_at[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(out_at, i));
        out->in_at[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(in_at, i));
        if (out->out_at[i] >= out->width || (out->halves == 2 && out->in_at[i] >= out->width)) out->usable = 0;
    }
    if (PyErr_Occurred()) return -1;
    return 0;
}

static int get_ll(PyObject *obj, PyObject *name, long long *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) return -1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (*out == -1 && PyErr_Occurred()) return -1;
    return overflow ? 1 : 0;
}

static int set_ll(PyObject *obj, PyObject *name, long long value) {
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL) return -1;
    int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

/* Load the store's counters; 1 when rows cannot be handled here (a counter beyond 64 bits), -1 error. */
static int load_rows(Ctx *c) {
    if (c->loaded) return c->loaded == 1 ? 0 : 1;
    PyObject *run = PyObject_GetAttr(c->state, str_run);
    if (run == NULL) return -1;
    c->store = PyObject_GetAttr(run, str_rows);
    Py_DECREF(run);
    if (c->store == NULL) return -1;
    c->buffer = PyObject_GetAttr(c->store, str_buffer);
    c->names = PyObject_GetAttr(c->store, str_names);
    c->index = PyObject_GetAttr(c->store, str_index);
    if (c->buffer == NULL || c->names == NULL || c->index == NULL) return -1;
    if (!PyByteArray_Check(c->buffer) || !PyList_Check(c->names) || !PyDict_Check(c->index)) {
        c->loaded = 2;
        return 1;
    }
    int rc = 0, r;
    if ((r = get_ll(c->store, str_count, &c->count)) < 0) return -1;
    rc |= r;
    if ((r = get_ll(c->store, str_wrong_rows, &c->wrong_rows)) < 0) return -1;
    rc |= r;
    if ((r = get_ll(c->store, str_busbw_count, &c->busbw_count)) < 0) return -1;
    rc |= r;
    if ((r = get_ll(c->state, str_last_size, &c->last_size)) < 0) return -1;
    rc |= r;
    PyObject *sum = PyObject_GetAttr(c->store, str_busbw_sum);
    if (sum == NULL) return -1;
    if (!PyFloat_Check(sum)) rc = 1;
    else c->busbw_sum = PyFloat_AS_DOUBLE(sum);
    Py_DECREF(sum);
    if (c->count > (1LL << 60) || c->busbw_count > (1LL << 60) || c->wrong_rows > (1LL << 60)) rc = 1;
    c->loaded = rc ? 2 : 1;
    return rc;
}

static int flush_rows(Ctx *c) {
    if (!c->rows_added) return 0;
    Py_ssize_t old = PyByteArray_GET_SIZE(c->buffer);
    if (PyByteArray_Resize(c->buffer, old + c->records.len) < 0) return -1;
    memcpy(PyByteArray_AS_STRING(c->buffer) + old, c->records.data, (size_t)c->records.len);
    c->records.len = 0;
    c->rows_added = 0;
    if (set_ll(c->store, str_count, c->count) < 0 || set_ll(c->store, str_wrong_rows, c->wrong_rows) < 0 ||
        set_ll(c->store, str_busbw_count, c->busbw_count) < 0 || set_ll(c->state, str_last_size, c->last_size) < 0)
        return -1;
    PyObject *sum = PyFloat_FromDouble(c->busbw_sum);
    if (sum == NULL) return -1;
    int rc = PyObject_SetAttr(c->store, str_busbw_sum, sum);
    Py_DECREF(sum);
    if (rc < 0) return -1;
    if (c->has_repeated) {
        if (set_ll(c->state, str_repeated_size, c->repeated_size) < 0) return -1;
        c->has_repeated = 0;
    }
    /* RowStore.spill_if_full: past rowstore.SPILL the store writes its buffer out (and replaces it) */
    PyObject *r = PyObject_CallMethodNoArgs(c->store, str_spill);
    if (r == NULL) return -1;
    int spilled = PyObject_IsTrue(r);
    Py_DECREF(r);
    if (spilled) {
        Py_DECREF(c->buffer);
        c->buffer = PyObject_GetAttr(c->store, str_buffer);
        if (c->buffer == NULL) return -1;
        if (!PyByteArray_Check(c->buffer)) c->loaded = 2;
    }
    return 0;
}

/* RowStore._name; -1 error, -2 decline (index would not fit the record's 16 bits) */
static long name_index(Ctx *c, const unsigned char *tok, Py_ssize_t len, int is_type) {
    char *cache = is_type ? c->type_tok : c->redop_tok;
    Py_ssize_t *cache_len = is_type ? &c->type_len : &c->redop_len;
    long *cache_index = is_type ? &c->type_index : &c->redop_index;
    if (*cache_len == len && len < 64 && memcmp(cache, tok, (size_t)len) == 0) return *cache_index;
    PyObject *key = PyUnicode_DecodeLatin1((const char *)tok, len, NULL);
    if (key == NULL) return -1;
    PyObject *found = PyDict_GetItemWithError(c->index, key);
    long index;
    if (found != NULL) {
        index = PyLong_AsLong(found);
        if (index == -1 && PyErr_Occurred()) {
            Py_DECREF(key);
            return -1;
        }
    } else if (PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    } else {
        index = (long)PyList_GET_SIZE(c->names);
        if (index > 65535) {
            Py_DECREF(key);
            return -2;
        }
        PyObject *value = PyLong_FromLong(index);
        if (value == NULL || PyDict_SetItem(c->index, key, value) < 0 || PyList_Append(c->names, key) < 0) {
            Py_XDECREF(value);
            Py_DECREF(key);
            return -1;
        }
        Py_DECREF(value);
    }
    Py_DECREF(key);
    if (index < 0 || index > 65535) return -2;
    if (len < 64) {
        memcpy(cache, tok, (size_t)len);
        *cache_len = len;
        *cache_index = index;
    }
    return index;
}

/* _FastRow._half: time, algbw, busbw, wrong, rel_error; 0 decline */
static int parse_half(const unsigned char **tok, const Py_ssize_t *len, const int *at, double scale, double *h) {
    double t, algbw, busbw;
    if (!parse_double(tok[at[0]], len[at[0]], &t) || !parse_double(tok[at[1]], len[at[1]], &algbw) ||
        !parse_double(tok[at[2]], len[at[2]], &busbw))
        return 0;
    if (!isfinite(t) || !isfinite(algbw) || !isfinite(busbw)) return 0;
    double wrong = py_nan(), rel = py_nan();
    if (at[3] >= 0) {
        const unsigned char *s = tok[at[3]];
        Py_ssize_t n = len[at[3]];
        if (n == 1 && s[0] == '0') {
            wrong = 0.0;
        } else if (!(n == 3 && memcmp(s, "N/A", 3) == 0)) {
            double v;
            if (!parse_double(s, n, &v) || !isfinite(v)) return 0;
            if (trunc(v) != v) return 0; /* a fraction is no count: the Python parser's wrong_count judges it */
            wrong = trunc(v) + 0.0; /* float(int(v)): no -0.0 */
            if (wrong < 0) return 0; /* no count: the Python parser counts the row invalid */
        }
    } else if (at[4] >= 0) {
        const unsigned char *s = tok[at[4]];
        Py_ssize_t n = len[at[4]];
        if (!(n == 3 && memcmp(s, "N/A", 3) == 0)) {
            double v;
            if (!parse_double(s, n, &v) || !isfinite(v)) return 0;
            rel = v;
        }
    }
    h[0] = t * scale;
    h[1] = algbw;
    h[2] = busbw;
    h[3] = wrong;
    h[4] = rel;
    return 1;
}

/* rowstore._no_measurement: a negative time or bandwidth, or no time for a message of some bytes */
static int no_measurement(long long size, const double *h) {
    return h[0] < 0 || h[1] < 0 || h[2] < 0 || (size > 0 && h[0] == 0);
}

/* little-endian host (checked at import): the record's "<" fields are the native bytes */
static inline void put_le64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* One result row (_FastRow.parse + RowStore.append_values + TextParser._after_row). 1 done, 0 decline,
 * -1 error. */
static int handle_row(Ctx *c, const Spec *spec, const unsigned char *s, Py_ssize_t n) {
    if (!spec->usable) return 0;
    const unsigned char *tok[MAX_TOKENS + 1];
    Py_ssize_t len[MAX_TOKENS + 1];
    int count = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && is_ws(s[i])) i++;
        if (i >= n) break;
        Py_ssize_t start = i;
        while (i < n && !is_ws(s[i])) i++;
        /* more tokens than the layout: parse_row finds more preamble columns than the header has */
        if (count == spec->width) return 1;
        tok[count] = s + start;
        len[count] = i - start;
        count++;
    }
    /* fewer: columns printed blank (pre-2.13.4 alltoall's op name); fewer than the preamble can lose: none */
    int blank = spec->width - count;
    if (blank > spec->n_extra) return 1;
    long long size, cnt;
    for (int k = 0; k < 2; k++) {
        if (len[k] < 1 || len[k] > 18) return 0;
        for (Py_ssize_t j = 0; j < len[k]; j++)
            if (!is_digit(tok[k][j])) return 0;
    }
    parse_int64(tok[0], len[0], &size);
    parse_int64(tok[1], len[1], &cnt);
    /* type: ^[A-Za-z_][A-Za-z0-9_]*$ */
    if (len[2] < 1 || is_digit(tok[2][0])) return 0;
    for (Py_ssize_t j = 0; j < len[2]; j++)
        if (!is_word(tok[2][j])) return 0;
    const unsigned char *redop = NULL;
    Py_ssize_t redop_len = 0;
    long long root = -1;
    int has_root = 0;
    if (blank == 0) {
        for (int k = 0; k < spec->n_extra; k++) {
            const unsigned char *t = tok[3 + k];
            Py_ssize_t l = len[3 + k];
            if (spec->extra_root[k]) {
                if (!parse_int64(t, l, &root)) return 0;
                has_root = 1;
            } else {
                redop = t;
                redop_len = l;
            }
        }
    } else {
        /* _parse_preamble: each printed column is the root when it reads as an integer and the layout has
         * a root column, else the op */
        int layout_root = 0;
        for (int k = 0; k < spec->n_extra; k++) layout_root |= spec->extra_root[k];
        for (int k = 0; k < spec->n_extra - blank; k++) {
            const unsigned char *t = tok[3 + k];
            Py_ssize_t l = len[3 + k];
            long long v;
            if (parse_int64(t, l, &v)) {
                if (layout_root) {
                    root = v;
                    has_root = 1;
                    continue;
                }
            } else {
                /* int() also reads "1_000" and longer numbers: Python decides */
                for (Py_ssize_t j = 0; j < l; j++)
                    if (is_digit(t[j])) return 0;
            }
            redop = t;
            redop_len = l;
        }
    }
    int out_at[5], in_at[5];
    for (int k = 0; k < 5; k++) {
        out_at[k] = spec->out_at[k] < 0 ? -1 : spec->out_at[k] - blank;
        in_at[k] = spec->in_at[k] < 0 ? -1 : spec->in_at[k] - blank;
    }
    double out[5], inp[5] = {0.0, 0.0, 0.0, py_nan(), py_nan()};
    if (!parse_half(tok, len, out_at, spec->scale, out)) return 0;
    if (spec->halves == 2 && !parse_half(tok, len, in_at, spec->scale, inp)) return 0;
    /* rowstore._no_measurement: the Python code counts and names such rows */
    if (no_measurement(size, out) || (spec->halves == 2 && no_measurement(size, inp))) return 0;
    if (redop != NULL && redop_len == 4 && memcmp(redop, "none", 4) == 0) redop = NULL;
    if (!has_root || root < 0) root = -1;
    int r = load_rows(c);
    if (r < 0) return -1;
    if (r > 0) return 0;
    if (len[2] >= 64 || (redop != NULL && redop_len >= 64)) return 0;
    long type_index = name_index(c, tok[2], len[2], 1);
    if (type_index == -1) return -1;
    if (type_index == -2) return 0;
    long redop_index = 0;
    if (redop != NULL) {
        redop_index = name_index(c, redop, redop_len, 0);
        if (redop_index == -1) return -1;
        if (redop_index == -2) return 0;
    }
    if (buf_reserve(&c->records, REC_SIZE) < 0) return -1;
    unsigned char *rec = (unsigned char *)c->records.data + c->records.len;
    put_le64(rec, (uint64_t)size);
    put_le64(rec + 8, (uint64_t)cnt);
    put_le64(rec + 16, (uint64_t)root);
    rec[24] = spec->halves == 2 ? 1 : 0;
    rec[25] = (unsigned char)(type_index & 0xff);
    rec[26] = (unsigned char)(type_index >> 8);
    rec[27] = (unsigned char)(redop_index & 0xff);
    rec[28] = (unsigned char)(redop_index >> 8);
    memcpy(rec + OFF_DOUBLES, out, 5 * sizeof(double));
    memcpy(rec + OFF_DOUBLES + 40, inp, 5 * sizeof(double));
    c->records.len += REC_SIZE;
    c->rows_added = 1;
    c->count++;
    int two = spec->halves == 2;
    if (out[3] > 0 || (two && inp[3] > 0)) c->wrong_rows++;
    c->busbw_sum += out[2] + (two ? inp[2] : 0.0);
    c->busbw_count += two ? 2 : 1;
    if (size == c->last_size && size > 0) {
        c->repeated_size = size;
        c->has_repeated = 1;
    }
    c->last_size = size;
    if (c->records.len >= (4 << 20) && flush_rows(c) < 0) return -1;
    return 1;
}

/* TextParser._on_rank on a line whose first word is "Rank": 1 done, 2 no match, 0 decline, -1 error */
static int handle_rank(Ctx *c, const unsigned char *s, Py_ssize_t n) {
    /* _RANK = ^#\s*Rank\s+(\d+)\s+(?:Group\s+-?\d+\s+)?(?:Pid\s+(\d+)\s+)?on\s(?:\s*(\S+))? */
    Py_ssize_t i = 0;
    if (n < 1 || s[0] != '#') return 2;
    i = 1;
    while (i < n && is_ws(s[i])) i++;
    if (!starts(s + i, n - i, "Rank")) return 2;
    i += 4;
    if (i >= n || !is_ws(s[i])) return 2;
    while (i < n && is_ws(s[i])) i++;
    Py_ssize_t rank_start = i;
    while (i < n && is_digit(s[i])) i++;
    Py_ssize_t rank_len = i - rank_start;
    if (rank_len == 0) return 2;
    if (i >= n || !is_ws(s[i])) return 2;
    while (i < n && is_ws(s[i])) i++;
    Py_ssize_t save = i;
    if (starts(s + i, n - i, "Group")) {
        Py_ssize_t j = i + 5;
        int ok = j < n && is_ws(s[j]);
        while (j < n && is_ws(s[j])) j++;
        if (ok && j < n && s[j] == '-') j++;
        Py_ssize_t d = j;
        int other = 0; /* a group other than 0: the Python code counts the NCCL_TESTS_SPLIT groups */
        while (j < n && is_digit(s[j])) other |= s[j++] != '0';
        ok = ok && j > d && j < n && is_ws(s[j]);
        if (ok && other) return 0;
        while (j < n && is_ws(s[j])) j++;
        i = ok ? j : save;
    }
    save = i;
    const unsigned char *pid = NULL;
    Py_ssize_t pid_len = 0;
    if (starts(s + i, n - i, "Pid")) {
        Py_ssize_t j = i + 3;
        int ok = j < n && is_ws(s[j]);
        while (j < n && is_ws(s[j])) j++;
        Py_ssize_t d = j;
        while (j < n && is_digit(s[j])) j++;
        ok = ok && j > d && j < n && is_ws(s[j]);
        if (ok) {
            pid = s + d;
            pid_len = j - d;
        }
        while (j < n && is_ws(s[j])) j++;
        i = ok ? j : save;
    }
    if (!(starts(s + i, n - i, "on") && i + 2 < n && is_ws(s[i + 2]))) return 2;
    /* matched; the host is the word after "on" (the line has no trailing whitespace, so there is one) */
    Py_ssize_t host_start = i + 3;
    while (host_start < n && is_ws(s[host_start])) host_start++;
    Py_ssize_t host_end = host_start;
    while (host_end < n && !is_ws(s[host_end])) host_end++;
    if (rank_len > 17) return 0;
    if (!c->ranks_loaded) {
        c->ranks_loaded = 1;
        c->ranks_usable = 0;
        int r = get_ll(c->state, str_max_rank, &c->max_rank);
        if (r < 0) return -1;
        c->rank_pids = PyObject_GetAttr(c->state, str_rank_pids);
        c->rank_hosts = PyObject_GetAttr(c->state, str_rank_hosts);
        c->interleaved = PyObject_GetAttr(c->state, str_interleaved);
        if (c->rank_pids == NULL || c->rank_hosts == NULL || c->interleaved == NULL) return -1;
        c->ranks_usable = r == 0 && PyDict_CheckExact(c->rank_pids) && PyDict_CheckExact(c->rank_hosts) &&
                          PySet_CheckExact(c->interleaved);
        c->max_rank_start = c->max_rank;
    }
    if (!c->ranks_usable) return 0;
    long long rank;
    parse_int64(s + rank_start, rank_len, &rank);
    PyObject *key = PyLong_FromLongLong(rank);
    if (key == NULL) return -1;
    PyObject *pid_obj = pid != NULL ? PyUnicode_DecodeLatin1((const char *)pid, pid_len, NULL) : Py_NewRef(str_question);
    if (pid_obj == NULL) {
        Py_DECREF(key);
        return -1;
    }
    if (rank > c->max_rank) c->max_rank = rank;
    PyObject *pids = PyDict_GetItemWithError(c->rank_pids, key);
    int rc = 0;
    if (pids != NULL) {
        if (PySet_Add(c->interleaved, key) < 0 || PyList_Append(pids, pid_obj) < 0) rc = -1;
    } else if (PyErr_Occurred()) {
        rc = -1;
    } else {
        PyObject *list = PyList_New(1);
        if (list == NULL) {
            rc = -1;
        } else {
            PyList_SET_ITEM(list, 0, Py_NewRef(pid_obj));
            if (PyDict_SetItem(c->rank_pids, key, list) < 0) rc = -1;
            Py_DECREF(list);
        }
    }
    if (rc == 0 && host_end > host_start) {
        PyObject *host = PyUnicode_DecodeLatin1((const char *)s + host_start, host_end - host_start, NULL);
        if (host == NULL || PyDict_SetDefault(c->rank_hosts, key, host) == NULL) rc = -1;
        Py_XDECREF(host);
    }
    Py_DECREF(key);
    Py_DECREF(pid_obj);
    return rc < 0 ? -1 : 1;
}

/* The first words TextParser._handlers_for dispatches on ("error:" is a prefix), exported as WORDS: a line handed
 * back with kind K_WORD + i starts with WORDS[i], and the parser calls that word's handlers without feed(). */
static const char *const WORDS[] = {"error:", "nccl-tests", "Collective", "nThread", "Rank", "NCCL", "Out", "Avg",
                                    "size", "bytes", "Reducing"};
#define N_WORDS ((int)(sizeof(WORDS) / sizeof(WORDS[0])))
#define W_RANK 4

/* handle_line's results beyond 1 (handled), 0 (decline: feed() decides) and -1 (error): what the line is, for
 * the parser to call its handlers directly. For each, lines.find_nccl_line is None (the NCCL lines were handled
 * or declined before) and, but for K_FAILURE, the line holds no "failure" and no "timeout". */
enum { K_FAILURE = 2, K_WORD = 3 };

/* the index in WORDS of the line's first word (after an optional run of '#'), -1 none */
static int handler_word(const unsigned char *w, Py_ssize_t n) {
    if (starts(w, n, "error:")) return 0;
    for (int k = 1; k < N_WORDS; k++) {
        size_t l = strlen(WORDS[k]);
        if ((size_t)n == l && memcmp(w, WORDS[k], l) == 0) return k;
    }
    return -1;
}

/* 1 handled, 0 decline, K_FAILURE or K_WORD + i (see there), -1 error */
static int handle_line(Ctx *c, const Spec *spec, PyObject *messages, const unsigned char *s, Py_ssize_t n,
                       const LineInfo *li, long long *info) {
    if (li->nonascii) return 0;
    Py_ssize_t tag = n > 0 && s[0] == '[' ? mpi_tag(s, n) : 0;
    s += tag;
    n -= tag;
    while (n > 0 && is_ws(s[n - 1])) n--;
    Py_ssize_t lead = 0;
    while (lead < n && is_ws(s[lead])) lead++;
    if (li->nccl >= 0) {
        Py_ssize_t at, end;
        int level = nccl_tag(s, n, li->nccl - tag, &at, &end);
        if (level) {
            /* handled here only when the line is "host:pid:tid [dev] NCCL ...": with anything before (a comment
             * quoting NCCL, a launcher's tag) or no such prefix, the Python parser decides */
            if (nccl_prefix(s, at) != lead || s[lead] == '#' || s[lead] == '+') return 0;
            if (level == 2) return 0; /* WARN: a run warning */
            const unsigned char *m = s + end;
            Py_ssize_t mn = n - end;
            while (mn > 0 && is_ws(m[0])) m++, mn--;
            while (mn > 0 && is_ws(m[mn - 1])) mn--;
            if (starts(m, mn, "NCCL version ")) return 0;
            if (lead < n && is_digit(s[lead])) return 0; /* maybe glued onto a row */
            (*info)++;
            Py_ssize_t mstart = (m - s) + tag; /* offsets in LineInfo count from the raw line's start */
            int via = li->via >= mstart;
            if (via && !c->queued_via && !message_start(m, mn)) {
                /* a channel line: what _read_gdr records, gathered here. Python adds it before the messages
                 * queued in this call, so gathering stops once a queued one may name a channel network too:
                 * channel_networks keeps its order. */
                Py_ssize_t net, net_len;
                int gdr;
                if (via_net(m, mn, &net, &net_len, &gdr)) {
                    PyObject *name = PyUnicode_DecodeLatin1((const char *)m + net, net_len, NULL);
                    if (name == NULL) return -1;
                    int known = PySequence_Contains(c->channels, name);
                    if (known < 0 || (!known && PyList_Append(c->channels, name) < 0)) {
                        Py_DECREF(name);
                        return -1;
                    }
                    Py_DECREF(name);
                    if (gdr) c->gdr++;
                    else c->host++;
                    return 1;
                }
            }
            if (message_relevant(m, mn, via, li->gdr >= mstart)) {
                if (via) c->queued_via = 1;
                PyObject *text = PyUnicode_DecodeLatin1((const char *)m, mn, NULL);
                if (text == NULL) return -1;
                int rc = PyList_Append(messages, text);
                Py_DECREF(text);
                if (rc < 0) return -1;
            }
            return 1;
        }
        if (starts(s + lead, n - lead, "NCCL version")) return 0; /* the bare version line */
    }
    if (li->failure || li->timeout) return K_FAILURE;
    if (lead == n) return 1; /* blank */
    unsigned char first = s[lead];
    if (is_digit(first)) {
        if (spec == NULL) return 1; /* no table yet: _try_row ignores it */
        return handle_row(c, spec, s, n);
    }
    /* TextParser._handlers_for: the first word after an optional run of '#', on any line */
    Py_ssize_t i = lead;
    while (i < n && s[i] == '#') i++;
    while (i < n && is_ws(s[i])) i++;
    Py_ssize_t w = i;
    while (i < n && !is_ws(s[i])) i++;
    Py_ssize_t wl = i - w;
    if (wl > 0) {
        int word = handler_word(s + w, wl);
        if (word == W_RANK && c->state != Py_None) {
            int r = handle_rank(c, s, n);
            if (r != 2) return r == 0 ? K_WORD + word : r;
        } else if (word >= 0) {
            return K_WORD + word;
        }
    }
    if (first == '#') return 1; /* a comment feed ignores */
    /* other text (_on_other): only a command line naming a *_perf binary, or a launcher's failure line
     * (parser._LAUNCH_WORDS), matters */
    return li->perf || launch_word(s, n) ? 0 : 1;
}

static int finish_ctx(Ctx *c) {
    int rc = 0;
    if (c->loaded == 1 && flush_rows(c) < 0) rc = -1;
    if (rc == 0 && c->ranks_loaded && c->ranks_usable && c->max_rank != c->max_rank_start &&
        set_ll(c->state, str_max_rank, c->max_rank) < 0)
        rc = -1;
    Py_XDECREF(c->store);
    Py_XDECREF(c->buffer);
    Py_XDECREF(c->names);
    Py_XDECREF(c->index);
    Py_XDECREF(c->rank_pids);
    Py_XDECREF(c->rank_hosts);
    Py_XDECREF(c->interleaved);
    PyMem_Free(c->records.data);
    return rc;
}

static PyObject *fr_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "scan(block, pos, state, spec, messages, channels)");
        return NULL;
    }
    PyObject *block = args[0];
    if (!PyUnicode_Check(block) || !PyList_Check(args[4]) || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "scan: block must be str, messages and channels lists");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(block);
    if (PyUnicode_KIND(block) != PyUnicode_1BYTE_KIND)
        return Py_BuildValue("(innnLLL)", -1, pos, pos, pos, 0LL, 0LL, 0LL);
    const unsigned char *d = PyUnicode_1BYTE_DATA(block);
    Spec spec_value, *spec = NULL;
    if (args[3] != Py_None) {
        if (parse_spec(args[3], &spec_value) < 0) return NULL;
        spec = &spec_value;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    c.state = args[2];
    c.channels = args[5];
    c.type_len = c.redop_len = -1;
    if (spec != NULL && c.state == Py_None) spec = NULL;
    long long info = 0;
    int kind = 0;
    Py_ssize_t start = n, end = n, next = n;
    LineInfo li;
    while (pos < n) {
        analyze(d, pos, n, &li);
        Py_ssize_t e = li.end, nx = li.next;
        int r = handle_line(&c, spec, args[4], d + pos, e - pos, &li, &info);
        if (r < 0) {
            finish_ctx(&c);
            return NULL;
        }
        if (r != 1) {
            kind = r == 0 ? 1 : r;
            start = pos;
            end = e;
            next = nx;
            break;
        }
        pos = nx;
    }
    if (finish_ctx(&c) < 0) return NULL;
    return Py_BuildValue("(innnLLL)", kind, start, end, next, info, c.gdr, c.host);
}

static PyObject *fr_next_line(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "next_line(block, pos)");
        return NULL;
    }
    PyObject *block = args[0];
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(block);
    if (PyUnicode_KIND(block) != PyUnicode_1BYTE_KIND || pos >= n) Py_RETURN_NONE;
    Py_ssize_t nx;
    Py_ssize_t e = line_end(PyUnicode_1BYTE_DATA(block), pos, n, &nx);
    return Py_BuildValue("(nnn)", pos, e, nx);
}

/* ---------------------------------------------------------------------------------------------------- */
/* format_rows()                                                                                         */

static inline uint64_t get_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline double get_double(const unsigned char *p) {
    uint64_t bits = get_le64(p);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

static int put_wrong(Buf *b, double w) {
    if (w != w) {
        LIT(b, "null");
        return 0;
    }
    if (w > -9.2e18 && w < 9.2e18) {
        b->len += put_ll(b->data + b->len, (long long)w);
        return 0;
    }
    PyObject *v = PyLong_FromDouble(w); /* int(w): OverflowError for inf, as in Python */
    if (v == NULL) return -1;
    PyObject *text = PyObject_Str(v);
    Py_DECREF(v);
    if (text == NULL) return -1;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL || buf_reserve(b, n) < 0) {
        Py_DECREF(text);
        return -1;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    Py_DECREF(text);
    return 0;
}

static int put_half(Buf *b, const unsigned char *p) {
    /* p: time, algbw, busbw, wrong, rel_error */
    if (buf_reserve(b, 400) < 0) return -1;
    LIT(b, "{\n            \"time_us\": ");
    if (put_double(b, get_double(p)) < 0) return -1;
    LIT(b, ",\n            \"algbw\": ");
    if (put_double(b, get_double(p + 8)) < 0) return -1;
    LIT(b, ",\n            \"busbw\": ");
    if (put_double(b, get_double(p + 16)) < 0) return -1;
    LIT(b, ",\n            \"wrong\": ");
    if (put_wrong(b, get_double(p + 24)) < 0) return -1;
    if (buf_reserve(b, 200) < 0) return -1;
    LIT(b, ",\n            \"rel_error\": ");
    double rel = get_double(p + 32);
    if (rel != rel) LIT(b, "null");
    else if (put_double(b, rel) < 0) return -1;
    LIT(b, "\n          }");
    return 0;
}

static PyObject *fr_format_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "format_rows(records, names: list[str])");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *names = args[1];
    Py_ssize_t n_names = PyList_GET_SIZE(names);
    const char **name_text = PyMem_Calloc((size_t)(n_names ? n_names : 1), sizeof(char *));
    Py_ssize_t *name_len = PyMem_Calloc((size_t)(n_names ? n_names : 1), sizeof(Py_ssize_t));
    Buf b = {NULL, 0, 0};
    PyObject *result = NULL;
    if (name_text == NULL || name_len == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n_names; i++) {
        PyObject *item = PyList_GET_ITEM(names, i);
        if (!PyUnicode_Check(item) || !PyUnicode_IS_ASCII(item)) {
            PyErr_SetString(PyExc_TypeError, "format_rows: names must be ASCII JSON text");
            goto done;
        }
        name_text[i] = (const char *)PyUnicode_1BYTE_DATA(item);
        name_len[i] = PyUnicode_GET_LENGTH(item);
    }
    if (view.len % REC_SIZE != 0) {
        PyErr_SetString(PyExc_ValueError, "format_rows: not a whole number of records");
        goto done;
    }
    Py_ssize_t count = view.len / REC_SIZE;
    if (buf_reserve(&b, count * 520 + 64) < 0) goto done;
    const unsigned char *rec = view.buf;
    for (Py_ssize_t r = 0; r < count; r++, rec += REC_SIZE) {
        long long size = (long long)get_le64(rec), cnt = (long long)get_le64(rec + 8),
                  root = (long long)get_le64(rec + 16);
        int flags = rec[24];
        Py_ssize_t type_index = rec[25] | (rec[26] << 8), redop_index = rec[27] | (rec[28] << 8);
        if (type_index >= n_names || redop_index >= n_names) {
            PyErr_SetString(PyExc_IndexError, "list index out of range");
            goto done;
        }
        if (buf_reserve(&b, 400 + name_len[type_index] + name_len[redop_index]) < 0) goto done;
        if (r) LIT(&b, ",\n");
        LIT(&b, "        {\n          \"size\": ");
        b.len += put_ll(b.data + b.len, size);
        LIT(&b, ",\n          \"count\": ");
        b.len += put_ll(b.data + b.len, cnt);
        LIT(&b, ",\n          \"type\": ");
        buf_lit(&b, name_text[type_index], name_len[type_index]);
        LIT(&b, ",\n          \"redop\": ");
        buf_lit(&b, name_text[redop_index], name_len[redop_index]);
        LIT(&b, ",\n          \"root\": ");
        if (root < 0) LIT(&b, "null");
        else b.len += put_ll(b.data + b.len, root);
        LIT(&b, ",\n          \"out_of_place\": ");
        if (put_half(&b, rec + OFF_DOUBLES) < 0) goto done;
        if (buf_reserve(&b, 64) < 0) goto done;
        LIT(&b, ",\n          \"in_place\": ");
        if (flags & 1) {
            if (put_half(&b, rec + OFF_DOUBLES + 40) < 0) goto done;
        } else {
            LIT(&b, "null");
        }
        if (buf_reserve(&b, 16) < 0) goto done;
        LIT(&b, "\n        }");
    }
    result = PyUnicode_New(b.len, 127);
    if (result != NULL) memcpy(PyUnicode_1BYTE_DATA(result), b.data ? b.data : "", (size_t)b.len);
done:
    PyMem_Free(b.data);
    PyMem_Free((void *)name_text);
    PyMem_Free(name_len);
    PyBuffer_Release(&view);
    return result;
}

/* consistency._first_unprintable: the first record of ``records`` that nccl-tests cannot have printed, and the
 * scale (1 or the run's ranks: a row's size over its count's bytes) after them; -1 when every record keeps to it.
 * element[i]: bytes of an element of the type named i (0: no type nccl-tests prints); redop_ok[i]: 1 when name i
 * is an op it prints (or none). scale 0: not known yet, the first record that counts elements sets it (a whole
 * multiple, 1 or ``ranks`` when ranks > 0). Counts times bytes are exact in 128 bits, as Python's ints are. */
static PyObject *fr_first_unprintable(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "first_unprintable(records, element, redop_ok, scale, ranks)");
        return NULL;
    }
    long long scale = PyLong_AsLongLong(args[3]), ranks = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) return NULL;
    if (scale < 0 || ranks < 0) {
        PyErr_SetString(PyExc_ValueError, "first_unprintable: scale and ranks must be 0 or more");
        return NULL;
    }
    Py_buffer view, element, redop_ok;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    if (PyObject_GetBuffer(args[1], &element, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &redop_ok, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&element);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t count = view.len / REC_SIZE, at = -1;
    const unsigned char *rec = view.buf, *el = element.buf, *ok = redop_ok.buf;
    for (Py_ssize_t r = 0; r < count; r++, rec += REC_SIZE) {
        __int128 size = (long long)get_le64(rec), cnt = (long long)get_le64(rec + 8);
        Py_ssize_t type_index = rec[25] | (rec[26] << 8), redop_index = rec[27] | (rec[28] << 8);
        long long bytes = type_index < element.len ? el[type_index] : 0;
        if (bytes == 0 || redop_index >= redop_ok.len || !ok[redop_index]) {
            at = r;
            break;
        }
        __int128 whole = cnt * bytes; /* under 2**71: a count under 2**63, an element of at most 255 bytes */
        if (scale == 0 && cnt > 0) {
            long long found = size % whole == 0 ? (long long)(size / whole) : 0;
            if (found < 1 || (found != 1 && ranks > 0 && found != ranks)) {
                at = r;
                break;
            }
            scale = found;
        }
        /* size == cnt * bytes * scale, without a product past 128 bits: a count of 0 holds no byte */
        if (cnt == 0 ? size != 0 : (size % whole != 0 || size / whole != scale)) {
            at = r;
            break;
        }
    }
    PyBuffer_Release(&redop_ok);
    PyBuffer_Release(&element);
    PyBuffer_Release(&view);
    return Py_BuildValue("(nL)", at, scale);
}

static PyObject *fr_float_repr(PyObject *self, PyObject *arg) {
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) return NULL;
    Buf b = {NULL, 0, 0};
    if (buf_reserve(&b, 64) < 0) return NULL;
    PyObject *result = NULL;
    if (put_double(&b, x) == 0) result = PyUnicode_FromStringAndSize(b.data, b.len);
    PyMem_Free(b.data);
    return result;
}

static PyObject *fr_parse_float(PyObject *self, PyObject *arg) {
    /* float(token) through the parser's strict path; None when it declines (for the tests) */
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (s == NULL) return NULL;
    double v;
    if (!parse_double((const unsigned char *)s, n, &v)) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))fr_scan, METH_FASTCALL, "scan(block, pos, state, spec, messages, channels)"},
    {"next_line", (PyCFunction)(void (*)(void))fr_next_line, METH_FASTCALL, "next_line(block, pos)"},
    {"format_rows", (PyCFunction)(void (*)(void))fr_format_rows, METH_FASTCALL, "format_rows(records, names)"},
    {"first_unprintable", (PyCFunction)(void (*)(void))fr_first_unprintable, METH_FASTCALL,
     "first_unprintable(records, element, redop_ok, scale, ranks)"},
    {"float_repr", fr_float_repr, METH_O, "repr(float) as format_rows writes it"},
    {"parse_float", fr_parse_float, METH_O, "float(token) as scan reads it, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastrows", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastrows(void) {
    init_classes();
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "_fastrows: little-endian hosts only");
        return NULL;
    }
#define INTERN(var, text)                                                                                    \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;
    INTERN(str_fast, "fast")
    INTERN(str_run, "run")
    INTERN(str_rows, "rows")
    INTERN(str_buffer, "_buffer")
    INTERN(str_count, "_count")
    INTERN(str_wrong_rows, "wrong_rows")
    INTERN(str_busbw_sum, "busbw_sum")
    INTERN(str_busbw_count, "busbw_count")
    INTERN(str_names, "_names")
    INTERN(str_index, "_index")
    INTERN(str_spill, "spill_if_full")
    INTERN(str_last_size, "last_size")
    INTERN(str_repeated_size, "repeated_size")
    INTERN(str_max_rank, "max_rank")
    INTERN(str_rank_pids, "rank_pids")
    INTERN(str_rank_hosts, "rank_hosts")
    INTERN(str_interleaved, "interleaved")
    INTERN(str_question, "?")
#undef INTERN
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    /* accel.VERSION: the Python code uses an extension built from this very source only */
    if (PyModule_AddIntConstant(m, "VERSION", 10) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *words = PyTuple_New(N_WORDS);
    if (words == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    for (int k = 0; k < N_WORDS; k++) {
        PyObject *word = PyUnicode_FromString(WORDS[k]);
        if (word == NULL) {
            Py_DECREF(words);
            Py_DECREF(m);
            return NULL;
        }
        PyTuple_SET_ITEM(words, k, word);
    }
    if (PyModule_AddObject(m, "WORDS", words) < 0) {
        Py_DECREF(words);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
