/* The per-execution supervisor, natively: supervisor.py's behaviour and command line without
 * an interpreter to start.
 *
 * supervisor.py is the readable spec; this file does the same, step for step, and where the
 * two differ it says why. The engine compiles it once per host (relay_engine/agents/native.py,
 * cached by the hash of this file) and starts it with posix_spawn, in a session of its own:
 *
 *   supervisor --control FD --record PATH --grace S [--wrapped 0|1] [--deadline S]
 *              [--fence-grace S] [--cwd DIR] [--exe PATH] -- AGENT ARGV...
 *
 * 1. It makes itself a child subreaper, so whatever the agent starts stays its descendant.
 * 2. It writes its record (process.json) before the agent can run.
 * 3. It starts the agent (environment: its own, which the engine made the agent's) and
 *    waits, obeying the control socket: "term S" / "kill" stop the agent's tree, "deadline S"
 *    moves the deadline on, end-of-file (the engine is gone) stops the tree.
 * 4. A deadline that passes unextended fences the agent: TERM, KILL after --fence-grace.
 * 5. When the agent exits it sweeps the leftovers, says "exit CODE", and exits as the agent
 *    did (re-raising the signal that killed it).
 *
 * C11 and POSIX with Linux's signalfd and prctl; nothing beyond libc. Every process it
 * signals is found by walking /proc, as the Python does.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#ifndef PR_SET_CHILD_SUBREAPER
#define PR_SET_CHILD_SUBREAPER 36
#endif

#define LEFTOVER_GRACE_S 0.5 /* a daemon left behind by an agent that exited: TERM to KILL */
#define SETTLE_S 0.05        /* how long children get to exit by themselves after the agent */
#define KILL_ROUNDS 50
#define NEVER (-1.0) /* an instant (deadline, next KILL) that is not set */
#define USAGE                                                                              \
    "usage: supervisor --control FD --record PATH --grace S [--wrapped 0|1] [--deadline S]" \
    " [--fence-grace S] [--cwd DIR] [--exe PATH] -- AGENT ARGV...\n"

/* What process.json says; the same keys, in the same order, as supervisor.py writes. */
struct record {
    const char *path;
    long pid, pgid;
    long long start_ticks; /* -1: unknown (JSON null) */
    char boot_id[64];
    char host[256];
    bool subreaper;
    const char *execution_id;
    long long stopped_at; /* -1: not fenced; else "stopped": "deadline" and this */
};

struct options {
    int control;
    const char *record, *cwd, *exe;
    double grace_s, fence_grace_s, deadline_s; /* deadline_s NEVER: none */
    bool wrapped;
    char **agent_argv;
};

struct supervisor {
    int control; /* the engine's socket; -1 once it reached end-of-file */
    int signals; /* signalfd of the signals in watched_signals() */
    double grace_s, fence_grace_s;
    bool wrapped, fenced;
    double deadline_at, kill_at; /* monotonic seconds, or NEVER */
    pid_t agent_pid;
    bool agent_done;
    int agent_status; /* as Python's waitstatus_to_exitcode: the code, or -signal */
    char buffer[4096]; /* a command line read in part */
    size_t buffered;
    struct record record;
};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double min_s(double a, double b) {
    return a < b ? a : b;
}

/* Seconds as a poll() timeout: whole milliseconds, rounded up (so a wait never ends a moment
 * early and spins), at most ~11 days. */
static int poll_ms(double seconds) {
    if (seconds <= 0) return 0;
    return (int)(min_s(seconds, 1e6) * 1000 + 0.999);
}

static void sleep_s(double seconds) {
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
}

/* ---- the command line ------------------------------------------------------------------ */

static bool parse_number(const char *text, double *out) {
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    return errno == 0 && end != text && *end == '\0';
}

static bool parse_option(struct options *o, const char *name, const char *value) {
    double number = 0;
    if (strcmp(name, "--record") == 0) o->record = value;
    else if (strcmp(name, "--cwd") == 0) o->cwd = *value ? value : NULL;
    else if (strcmp(name, "--exe") == 0) o->exe = *value ? value : NULL;
    else if (strcmp(name, "--wrapped") == 0) o->wrapped = strcmp(value, "1") == 0;
    else if (strcmp(name, "--grace") == 0) return parse_number(value, &o->grace_s);
    else if (strcmp(name, "--fence-grace") == 0) return parse_number(value, &o->fence_grace_s);
    else if (strcmp(name, "--deadline") == 0) {
        return *value == '\0' || parse_number(value, &o->deadline_s); /* "": no deadline */
    } else if (strcmp(name, "--control") == 0 && parse_number(value, &number)) {
        o->control = (int)number;
    } else {
        return false;
    }
    return true;
}

/* Options come in pairs before "--"; the agent's argv is everything after it. */
static bool parse_args(int argc, char **argv, struct options *o) {
    *o = (struct options){.control = -1, .grace_s = 5, .fence_grace_s = NEVER,
                          .deadline_s = NEVER};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        if (i + 1 >= argc || !parse_option(o, argv[i], argv[i + 1])) return false;
    }
    if (i + 1 >= argc || o->control < 0 || !o->record) return false;
    if (o->fence_grace_s == NEVER) o->fence_grace_s = o->grace_s;
    o->agent_argv = argv + i + 1;
    return true;
}

/* ---- /proc ------------------------------------------------------------------------------- */

/* A small file in one read, NUL-terminated; its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = read(fd, buf, size - 1);
    close(fd);
    if (got >= 0) buf[got] = '\0';
    return got;
}

/* The fields of /proc/PID/stat after the command name (which may hold spaces and ")"):
 * *state is field 3, and the return is where field 4 (the parent pid) starts; NULL if none. */
static char *stat_fields(const char *path, char *buf, size_t size, char *state) {
    if (read_small(path, buf, size) < 0) return NULL;
    char *close_paren = strrchr(buf, ')');
    if (!close_paren || close_paren[1] != ' ' || !close_paren[2] || close_paren[3] != ' ') {
        return NULL;
    }
    *state = close_paren[2];
    return close_paren + 4;
}

/* When this process started, in clock ticks since boot (field 22); -1 if unreadable. */
static long long own_start_ticks(void) {
    char buf[1024], state;
    char *field = stat_fields("/proc/self/stat", buf, sizeof buf, &state);
    for (int i = 4; field && i < 22; i++) {
        field = strchr(field, ' ');
        if (field) field++;
    }
    return field ? strtoll(field, NULL, 10) : -1;
}

struct ptable {
    pid_t *pid, *parent;
    size_t len, cap;
};

static void ptable_add(struct ptable *t, pid_t pid, pid_t parent) {
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 256;
        pid_t *pids = realloc(t->pid, t->cap * sizeof *pids);
        pid_t *parents = pids ? realloc(t->parent, t->cap * sizeof *parents) : NULL;
        if (pids) t->pid = pids;
        if (parents) t->parent = parents;
        if (!pids || !parents) {
            t->cap = t->len; /* out of memory: this walk sees fewer processes */
            return;
        }
    }
    t->pid[t->len] = pid;
    t->parent[t->len++] = parent;
}

/* pid -> parent of every live (non-zombie) process we can see. */
static void list_processes(struct ptable *t) {
    DIR *proc = opendir("/proc");
    if (!proc) return;
    struct dirent *entry;
    while ((entry = readdir(proc)) != NULL) {
        char *end, path[64], buf[1024], state;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        char *field = stat_fields(path, buf, sizeof buf, &state);
        if (field && state != 'Z') ptable_add(t, (pid_t)pid, (pid_t)strtol(field, NULL, 10));
    }
    closedir(proc);
}

/* Every live process below `root`, parents first, into *found (the caller frees it). */
static size_t descendants(pid_t root, pid_t **found) {
    struct ptable t = {0};
    list_processes(&t);
    *found = malloc((t.len + 1) * sizeof **found);
    size_t count = 0;
    for (size_t at = 0; *found && at <= count; at++) { /* breadth first: at is the parent */
        pid_t parent = at == 0 ? root : (*found)[at - 1];
        for (size_t i = 0; i < t.len && count < t.len; i++) {
            if (t.parent[i] == parent) (*found)[count++] = t.pid[i];
        }
    }
    free(t.pid);
    free(t.parent);
    return *found ? count : 0;
}

static void signal_all(const pid_t *pids, size_t count, pid_t except, int sig) {
    for (size_t i = 0; i < count; i++) {
        if (pids[i] != except) kill(pids[i], sig);
    }
}

/* ---- the record --------------------------------------------------------------------------- */

static void json_string(FILE *out, const char *text) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
        else if (*c < 0x20) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

/* The record as JSON, formatted as supervisor.py formats it; malloc'd, or NULL. */
static char *record_json(const struct record *r, size_t *size) {
    char *body = NULL;
    FILE *out = open_memstream(&body, size);
    if (!out) return NULL;
    fprintf(out, "{\"supervisor_pid\": %ld, \"pgid\": %ld, \"start_ticks\": ", r->pid, r->pgid);
    if (r->start_ticks < 0) fputs("null", out);
    else fprintf(out, "%lld", r->start_ticks);
    fputs(", \"boot_id\": ", out);
    json_string(out, r->boot_id);
    fputs(", \"host\": ", out);
    json_string(out, r->host);
    fprintf(out, ", \"subreaper\": %s, \"execution_id\": ", r->subreaper ? "true" : "false");
    json_string(out, r->execution_id);
    if (r->stopped_at >= 0) fprintf(out, ", \"stopped\": \"deadline\", \"stopped_at\": %lld",
                                    r->stopped_at);
    fputc('}', out);
    if (fclose(out) == 0) return body;
    free(body);
    return NULL;
}

static bool write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t wrote = write(fd, data, size);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) return false;
        data += wrote;
        size -= (size_t)wrote;
    }
    return true;
}

/* Atomically (a temporary file renamed over it), so a reader never sees half a record. The
 * `first` record is instead created in place with one write: see supervisor.write_record. */
static bool write_record(const struct record *r, bool first) {
    size_t size;
    char *body = record_json(r, &size);
    if (!body) return false;
    char tmp[4096];
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    int fd = first ? open(r->path, flags | O_EXCL, 0644) : -1;
    if (first && fd < 0 && errno != EEXIST) {
        free(body);
        return false;
    }
    if (fd < 0) {
        first = false;
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", r->path, (long)getpid());
        fd = open(tmp, flags | O_TRUNC, 0644);
    }
    bool ok = fd >= 0 && write_all(fd, body, size);
    if (fd >= 0 && close(fd) != 0) ok = false;
    free(body);
    return ok && (first || rename(tmp, r->path) == 0);
}

static void host_facts(struct record *r) {
    char boot[64];
    if (read_small("/proc/sys/kernel/random/boot_id", boot, sizeof boot) > 0) {
        boot[strcspn(boot, "\n")] = '\0';
        snprintf(r->boot_id, sizeof r->boot_id, "%s", boot);
    }
    struct utsname names;
    if (uname(&names) == 0) snprintf(r->host, sizeof r->host, "%s", names.nodename);
}

/* ---- talking to the engine ---------------------------------------------------------------- */

static void tell(struct supervisor *s, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void tell(struct supervisor *s, const char *format, ...) {
    if (s->control < 0) return;
    char line[1024];
    va_list args;
    va_start(args, format);
    int len = vsnprintf(line, sizeof line - 1, format, args);
    va_end(args);
    if (len < 0) return;
    if ((size_t)len > sizeof line - 2) len = (int)sizeof line - 2;
    line[len++] = '\n';
    send(s->control, line, (size_t)len, MSG_NOSIGNAL); /* a closed socket is no fault of ours */
}

static void stop(struct supervisor *s, double grace_s);
static void kill_tree(struct supervisor *s);

static void apply_command(struct supervisor *s, char *line) {
    char *arg = strchr(line, ' ');
    double value;
    if (arg) *arg++ = '\0';
    if (strcmp(line, "deadline") == 0 && !s->fenced && arg && parse_number(arg, &value)) {
        s->deadline_at = now() + value;
    } else if (strcmp(line, "term") == 0) {
        stop(s, arg && *arg && parse_number(arg, &value) ? value : s->grace_s);
    } else if (strcmp(line, "kill") == 0) {
        kill_tree(s);
    }
}

/* Apply the engine's commands; true on end-of-file (the engine is gone). */
static bool read_commands(struct supervisor *s) {
    if (s->buffered == sizeof s->buffer) s->buffered = 0; /* no command is this long */
    ssize_t got = recv(s->control, s->buffer + s->buffered, sizeof s->buffer - s->buffered, 0);
    if (got <= 0) {
        close(s->control);
        s->control = -1;
        return true;
    }
    s->buffered += (size_t)got;
    char *start = s->buffer, *newline;
    while ((newline = memchr(start, '\n', s->buffered - (size_t)(start - s->buffer)))) {
        *newline = '\0';
        apply_command(s, start);
        start = newline + 1;
    }
    s->buffered -= (size_t)(start - s->buffer);
    memmove(s->buffer, start, s->buffered);
    return false;
}

/* True once the engine closed its end of the socket: it is not worth starting the agent. */
static bool engine_gone(struct supervisor *s) {
    struct pollfd ready = {s->control, POLLIN, 0};
    return poll(&ready, 1, 0) > 0 && read_commands(s);
}

/* ---- the agent's tree --------------------------------------------------------------------- */

/* Collect every exited child, the agent's status among them. */
static void reap(struct supervisor *s) {
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid != s->agent_pid) continue;
        s->agent_done = true;
        s->agent_status = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
    }
}

/* Whether any process is still below us. A subreaper adopts every orphan, so with no child
 * left there is no descendant either, and /proc need not be walked. */
static bool has_children(struct supervisor *s) {
    reap(s);
    siginfo_t info;
    return !(waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD);
}

/* SIGKILL every descendant, again and again until none is left (they may fork). */
static void kill_tree(struct supervisor *s) {
    s->kill_at = now() + 0.2;
    for (int round = 0; round < KILL_ROUNDS; round++) {
        pid_t *pids;
        size_t count = descendants(getpid(), &pids);
        if (count) signal_all(pids, count, 0, SIGKILL);
        free(pids);
        if (!count) return;
        reap(s);
        sleep_s(0.005);
    }
}

/* TERM the whole tree now (past bwrap's own pid when wrapped: bwrap would die of it and take
 * the agent along, graceless), KILL whatever is left after grace_s. */
static void stop(struct supervisor *s, double grace_s) {
    if (grace_s <= 0) {
        kill_tree(s);
        return;
    }
    pid_t *pids;
    size_t count = descendants(getpid(), &pids);
    signal_all(pids, count, s->wrapped ? s->agent_pid : 0, SIGTERM);
    free(pids);
    double at = now() + grace_s;
    if (s->kill_at == NEVER || at < s->kill_at) s->kill_at = at;
}

/* The deadline passed unextended: the engine may have lost the task's lease, so the agent
 * stops now, before another engine may claim the task; the record and the socket say why. */
static void fence(struct supervisor *s) {
    s->deadline_at = NEVER;
    s->fenced = true;
    s->record.stopped_at = (long long)time(NULL);
    write_record(&s->record, false); /* best effort, as the Python's */
    tell(s, "fenced deadline");
    stop(s, s->fence_grace_s);
}

static void drain_signals(struct supervisor *s, bool obey) {
    struct signalfd_siginfo info;
    while (read(s->signals, &info, sizeof info) == (ssize_t)sizeof info) {
        if (!obey || info.ssi_signo == SIGCHLD) continue;
        if (info.ssi_signo == SIGUSR1) kill_tree(s);
        else stop(s, s->grace_s); /* TERM, HUP, INT */
    }
}

/* Wait up to `timeout` for every child to exit; true if some are still there. */
static bool await_children(struct supervisor *s, double timeout) {
    double deadline = now() + timeout;
    while (has_children(s)) {
        double left = deadline - now();
        if (left <= 0) return true;
        struct pollfd ready = {s->signals, POLLIN, 0};
        poll(&ready, 1, poll_ms(min_s(left, 0.05)));
        drain_signals(s, false); /* SIGCHLD woke us; a stop signal now changes nothing */
    }
    return false;
}

/* The agent exited: whatever it left running gets a short TERM, then KILL. A sandbox's last
 * process often outlives bwrap by a moment: waited for first, so a clean exit walks no /proc. */
static void sweep(struct supervisor *s) {
    if (!await_children(s, SETTLE_S)) return;
    pid_t *pids;
    size_t count = descendants(getpid(), &pids);
    signal_all(pids, count, 0, SIGTERM);
    free(pids);
    await_children(s, min_s(s->grace_s, LEFTOVER_GRACE_S));
    kill_tree(s);
    reap(s);
}

/* ---- starting and waiting ----------------------------------------------------------------- */

static sigset_t watched_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    int watched[] = {SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGCHLD};
    for (size_t i = 0; i < sizeof watched / sizeof *watched; i++) sigaddset(&set, watched[i]);
    return set;
}

/* Only stdin, stdout, stderr and the control socket are ours to keep: the engine's
 * posix_spawn cannot close what a library left inheritable, and the agent must not get it. */
static void close_other_fds(int keep) {
    DIR *fds = opendir("/proc/self/fd");
    if (!fds) return;
    struct dirent *entry;
    while ((entry = readdir(fds)) != NULL) {
        char *end;
        long fd = strtol(entry->d_name, &end, 10);
        if (!*end && fd > 2 && fd != keep && fd != dirfd(fds)) close((int)fd);
    }
    closedir(fds);
}

static bool fail_start(struct supervisor *s, const char *argv0, const char *cwd, int error) {
    char reason[4096];
    if (cwd) snprintf(reason, sizeof reason, "cannot start '%s' (cwd %s): %s", argv0, cwd,
                      strerror(error));
    else snprintf(reason, sizeof reason, "cannot start '%s': %s", argv0, strerror(error));
    tell(s, "error %s", reason);
    dprintf(2, "relay: %s\n", reason); /* stderr.txt: for the exit's judge */
    return false;
}

/* Spawn the agent with an empty signal mask and SIGPIPE and SIGXFSZ at their defaults, as a
 * bare fork-exec from Python (subprocess's restore_signals) would have it. */
static bool start_agent(struct supervisor *s, const struct options *o) {
    if (o->cwd && chdir(o->cwd) != 0) return fail_start(s, o->agent_argv[0], o->cwd, errno);
    posix_spawnattr_t attr;
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGXFSZ);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    char **argv = o->agent_argv;
    int error = o->exe ? posix_spawn(&s->agent_pid, o->exe, NULL, &attr, argv, environ)
                       : posix_spawnp(&s->agent_pid, argv[0], NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (error) return fail_start(s, argv[0], NULL, error);
    tell(s, "started %ld", (long)s->agent_pid);
    return true;
}

/* How long the wait may sleep, in ms: until the next KILL or the deadline; -1: no limit. */
static int wait_ms(const struct supervisor *s) {
    double next = s->kill_at;
    if (s->deadline_at != NEVER && (next == NEVER || s->deadline_at < next)) next = s->deadline_at;
    return next == NEVER ? -1 : poll_ms(next - now());
}

/* Wait for the agent while obeying the engine, then sweep its leftovers. */
static void run(struct supervisor *s) {
    while (!s->agent_done) {
        struct pollfd ready[2] = {{s->signals, POLLIN, 0}, {s->control, POLLIN, 0}};
        poll(ready, s->control >= 0 ? 2 : 1, wait_ms(s));
        if (s->control >= 0 && ready[1].revents && read_commands(s)) {
            stop(s, s->grace_s); /* the engine is gone: so is its work */
        }
        if (ready[0].revents) drain_signals(s, true);
        if (s->deadline_at != NEVER && now() >= s->deadline_at) fence(s);
        if (s->kill_at != NEVER && now() >= s->kill_at) kill_tree(s);
        reap(s);
    }
    sweep(s);
}

/* Exit as the agent did: die of its signal, so the engine sees what the agent saw. */
static void exit_like(int code) {
    if (code < 0) {
        sigset_t sig;
        sigemptyset(&sig);
        sigaddset(&sig, -code);
        signal(-code, SIG_DFL);
        kill(getpid(), -code);
        sigprocmask(SIG_UNBLOCK, &sig, NULL);
    }
    _exit(code >= 0 ? code : 128 - code);
}

/* Become the supervisor: signals as a descriptor, the subreaper bit, the record. */
static void set_up(struct supervisor *s, const struct options *o) {
    *s = (struct supervisor){.control = o->control, .grace_s = o->grace_s,
                             .fence_grace_s = o->fence_grace_s, .wrapped = o->wrapped,
                             .deadline_at = NEVER, .kill_at = NEVER};
    if (o->deadline_s != NEVER) s->deadline_at = now() + o->deadline_s;
    close_other_fds(o->control);
    fcntl(o->control, F_SETFD, FD_CLOEXEC);
    sigset_t watched = watched_signals();
    sigprocmask(SIG_BLOCK, &watched, NULL);
    s->signals = signalfd(-1, &watched, SFD_NONBLOCK | SFD_CLOEXEC);
    const char *execution_id = getenv("RELAY_EXECUTION_ID");
    s->record = (struct record){.path = o->record, .pid = (long)getpid(),
                                .pgid = (long)getpgid(0), .start_ticks = own_start_ticks(),
                                .execution_id = execution_id ? execution_id : "",
                                .stopped_at = -1};
    s->record.subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0;
    host_facts(&s->record);
}

int main(int argc, char **argv) {
    struct options options;
    if (!parse_args(argc, argv, &options)) {
        fputs(USAGE, stderr);
        return 127;
    }
    static struct supervisor s;
    set_up(&s, &options);
    if (s.signals < 0) {
        dprintf(2, "relay: supervisor could not start: signalfd: %s\n", strerror(errno));
        return 127;
    }
    if (!write_record(&s.record, true)) {
        dprintf(2, "relay: supervisor could not start: cannot write %s: %s\n", options.record,
                strerror(errno));
        return 127;
    }
    if (engine_gone(&s) || !start_agent(&s, &options)) _exit(127);
    run(&s);
    tell(&s, "exit %d", s.agent_status);
    exit_like(s.agent_status);
}
