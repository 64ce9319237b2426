//! The command line as clap parses it: every command, flag and help text.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::output::parse_id;
use turnwal::SyncMode;
use turnwal::backend::sqlite::{JournalMode, SqliteOptions, Synchronous};

/// The exit statuses, as `--help` shows them. Kept next to the constants in
/// [`super::exit`]; a test checks the help text names each of them.
const EXIT_STATUS_HELP: &str = "\
Exit status:
  0   success
  1   verify found only a recoverable tail (torn bytes, an open turn, debris)
  2   corrupt data (verify, convert, or any command that meets a corrupt log)
  3   append rejected an input line (bad JSON, bad envelope, seq mismatch,
      turn-contract violation); everything acknowledged before it is stored
  4   any other error (session not found or already existing, locked, database
      busy, I/O, unsupported store)
  64  usage error (bad command line)

A broken pipe on stdout (e.g. `turnwal cat S | head -1`) exits 0.";

/// The long help of `turnwal convert`.
const CONVERT_HELP: &str = "\
Copy sessions from one store to another, losslessly: the header (lineage fields \
included), the policy, and every event's type, seq, time, payload bytes and extras. \
Stores are named as --store names them (a directory is a native WAL store); the \
destination is created if missing. The source is only read.

Sessions are copied one by one, each as one batch that the destination publishes \
atomically (so a killed convert leaves whole sessions only, never a prefix), fsynced; \
a session is reported on stdout once it is whole and durable in the destination.

A source session whose final turn is open (a crashed writer) is copied as its inspect \
view (`turnwal cat`): its stored events plus the synthetic closers recovery would add, \
so the copy is balanced; torn bytes or debris after its commit point are not copied. \
The session's line says so. Convert a store no writer is appending to.

A session the destination already holds is never overwritten: it is reported on \
stderr and not copied, and the other sessions are still copied; with --skip-existing \
it is skipped instead (a stdout line, not a failure), which finishes an interrupted \
convert. A session that cannot be copied for another reason (corrupt, unreadable, a \
failed write) is reported and skipped too; a failed copy leaves nothing behind.

Exit status: 0 when every session was copied; otherwise the highest of 2 (a source \
session is corrupt) and 4 (a session was not copied for another reason: already in the \
destination, not found, I/O), as for verify.";

/// The long help of `turnwal sync`.
const SYNC_HELP: &str = "\
Copy to DST what it lacks of SRC's sessions: a session DST does not hold is copied \
whole (header, policy, events), a session DST holds a prefix of gets the events \
after it, a session DST holds whole is left alone. Any store to any store (WAL, \
SQLite, JSONL, PostgreSQL), named as --store names them; DST is created if missing. \
SRC is only read.

Events are copied as SRC stores them: a session whose turn is open (a live writer, \
or a crashed one not recovered yet) is copied with its turn open, and a later sync \
copies the rest of it. Each batch (whole turns, fsynced) is one append of DST, so a \
sync killed at any moment leaves DST holding a prefix of SRC, which the next sync \
completes; a second sync copies nothing.

A DST session with the same id but another history (another header, more events, \
another event at its last seq) is refused, naming both positions, and left as it is. \
A DST session a live writer holds (a process, a PostgreSQL lease on any host) is \
refused too: sync never writes beside a writer.

--watch keeps syncing as SRC's sessions grow (and, with --all, as new ones appear), \
woken as `tail --follow` is, until interrupted; it prints a line per batch copied.

Exit status: 0 when every session is in step; otherwise the highest of 2 (a SRC \
session is corrupt) and 4 (refused or failed: diverged, held by a writer, not found, \
I/O). With --watch, runs until interrupted.";

/// `turnwal`: inspect, verify, repair and drive turnwal session stores.
#[derive(Debug, Parser)]
#[command(
    name = "turnwal",
    version,
    about = "Inspect, verify, repair and drive turnwal session stores",
    long_about = "Inspect, verify, repair and drive turnwal session stores.\n\n\
        A store holds agent sessions as append-only, turn-aware logs. The last complete \
        turn/end is each log's commit point; after a crash, torn bytes are cut and an open \
        final turn is closed with synthetic closers ending in turn/end {\"reason\":{\"kind\":\"interrupted\"}}.\n\n\
        Stores (-s/--store, else $TURNWAL_STORE, else ./.turnwal): a directory (existing or \
        not) is a native WAL store; a .sqlite or .db file (existing or not) is an SQLite \
        store; jsonl:ROOT is the upstream harness's JSONL root (jsonl+zstd:ROOT or \
        jsonl+none:ROOT choose the encoding of a new root); postgres://… or postgresql://… is \
        a PostgreSQL database (docs/POSTGRES.md).",
    after_long_help = EXIT_STATUS_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// The store: a directory, .sqlite/.db, jsonl:ROOT or postgres://…
    /// (default $TURNWAL_STORE, else ./.turnwal)
    #[arg(short = 's', long, global = true, value_name = "PATH")]
    pub store: Option<String>,

    /// How SQLite stores are opened.
    #[command(flatten)]
    pub sqlite: SqliteArgs,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The options of SQLite stores; each is refused when the command opens no
/// SQLite store.
#[derive(Debug, Clone, Default, Args)]
pub struct SqliteArgs {
    /// PRAGMA journal_mode the database is switched to: wal (default),
    /// delete, truncate or persist. SQLite keeps it in the file.
    #[arg(
        long,
        global = true,
        value_name = "MODE",
        help_heading = "SQLite stores",
        hide_short_help = true
    )]
    pub journal_mode: Option<JournalMode>,
    /// PRAGMA synchronous: full (default; every commit survives a power
    /// loss) or normal (in wal mode a power loss can lose the last commits).
    #[arg(
        long,
        global = true,
        value_name = "MODE",
        help_heading = "SQLite stores",
        hide_short_help = true
    )]
    pub synchronous: Option<Synchronous>,
    /// How long to wait for another connection's lock, in milliseconds
    /// (default 5000).
    #[arg(
        long,
        global = true,
        value_name = "MS",
        help_heading = "SQLite stores",
        hide_short_help = true
    )]
    pub busy_timeout: Option<u64>,
}

impl SqliteArgs {
    /// The first option given, as it is spelled, if any.
    pub fn given(&self) -> Option<&'static str> {
        if self.journal_mode.is_some() {
            Some("--journal-mode")
        } else if self.synchronous.is_some() {
            Some("--synchronous")
        } else if self.busy_timeout.is_some() {
            Some("--busy-timeout")
        } else {
            None
        }
    }

    /// The options, defaults filled in.
    pub fn options(&self) -> SqliteOptions {
        let default = SqliteOptions::default();
        SqliteOptions {
            journal_mode: self.journal_mode.unwrap_or(default.journal_mode),
            synchronous: self.synchronous.unwrap_or(default.synchronous),
            busy_timeout: self
                .busy_timeout
                .map_or(default.busy_timeout, Duration::from_millis),
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Append events read from stdin (one JSON object per line) and print
    /// `ack SEQ` as each becomes durable.
    #[command(
        long_about = "Append events read from stdin, one JSON object per line.\n\n\
        Each line is {\"type\":…,\"data\":…} with optional \"seq\" (checked: it must be the \
        next seq) and \"time\" (unix ms; default now), plus the optional upstream keys \
        \"ignorable\", \"sourceEventSeqs\" and \"surfaceOp\". Blank lines are skipped. Lines \
        already waiting on stdin are appended together as one batch.\n\n\
        When events become durable under the sync mode, `ack SEQ` is printed for each, in \
        order: with --sync turn when a batch holding a turn/end is fsynced, with batch after \
        every batch, with never once written; at end of input everything is flushed and \
        acknowledged. The first batch of a new session is always fsynced (materialization).\n\n\
        A rejected line stops the command with exit status 3 and an error naming the line; \
        the valid lines before it are stored and acknowledged first. A turn left open at end \
        of input stays open on disk; the next writer closes it as interrupted, and `append` \
        says so on stderr (turn, closer seqs) - unless not one of its input lines is \
        accepted: then it writes nothing at all. --continue continues the open turn instead."
    )]
    Append(AppendArgs),
    /// Print a session's events as JSONL, with the synthetic closers a crash
    /// would get (nothing is written).
    Cat(CatArgs),
    /// Check framing, checksums and the turn contract of one or every session.
    #[command(
        long_about = "Check framing, checksums, payload JSON and the turn contract of one \
        session, or of every session in the store. Writes nothing.\n\n\
        Exit status: 0 when everything is clean, 1 when only a recoverable tail (torn bytes, \
        an open turn, debris) was found, 2 when anything is corrupt (the worst wins)."
    )]
    Verify(VerifyArgs),
    /// Repair a crashed session: cut torn bytes, close an open turn.
    Recover(RecoverArgs),
    /// List the sessions of the store: state, size, activity, cwd, title.
    #[command(
        long_about = "List the sessions of the store, read from headers and log ends (and \
        each log's first events, for its title: the first user message, cut), in natural \
        order of ids unless --sort says otherwise. Sizes are human (KiB, MiB), times local; \
        --json gives exact figures, unix-ms times and every header field."
    )]
    Ls(LsArgs),
    /// Print a session's header: id, cwd, creation time, lineage, origin.
    Head(HeadArgs),
    /// Show the bytes each session takes, largest first, and the total.
    Du(DuArgs),
    /// Remove sessions not active for a while, or all but the most recent.
    #[command(
        long_about = "Remove the sessions last active (or, with no event, created) more than \
        DURATION ago (--older-than 30d), or all but the N most recently active (--keep N). \
        Each is removed as `rm` removes one, under its writer lock: a session another writer \
        holds is named on stderr and left. --dry-run names them and removes nothing. There is \
        no undo: export what you may want back first."
    )]
    Prune(PruneArgs),
    /// Write a session (header, policy, events) as one self-describing file.
    #[command(
        long_about = "Write a session as one self-describing file of JSON lines: an opening \
        line with the header, the policy and the event count, the events as `cat` shows them \
        (a crashed session's closers included), and a closing line repeating the count. On \
        stdout, or with -o FILE into FILE, written whole or not at all (a temporary file, \
        fsynced, renamed). `turnwal import` reads it into any store, on any machine."
    )]
    Export(ExportArgs),
    /// Create a session from a file `turnwal export` wrote.
    #[command(
        long_about = "Create the session a `turnwal export` file holds, in this store (any \
        backend), with its header and policy, in one atomic batch, fsynced. A file that is \
        truncated, altered into something that is not an export, or of a newer export format \
        is refused (exit 2 or 4) and nothing is created; a session the store already holds is \
        never overwritten (exit 4; --as ID imports it under another id). FILE - reads stdin."
    )]
    Import(ImportArgs),
    /// Show what a session (or every session) holds and cost: turns and how
    /// they ended, tokens, models, tool calls and failures, time span.
    Stats(StatsArgs),
    /// Copy a session's history (up to a turn boundary) into a new session.
    Fork(ForkArgs),
    /// Print the last stored events; with --follow, keep printing new ones.
    Tail(TailArgs),
    /// Show a session as a readable transcript: turns, messages, tool calls
    /// and results, failures, models and tokens (text, Markdown or HTML).
    #[command(
        long_about = "Show a session as a person reads it: each turn with its outcome and \
        duration; user and assistant text (a step's streamed chunks joined where no complete \
        message replaced them); tool calls with their arguments and results, failures marked; \
        the model and tokens of each assistant message; for a session a crash left open, the \
        closers recovery would add, marked [recovery]. Writes nothing.\n\n\
        --format text (the default; coloured on a terminal unless NO_COLOR is set), markdown, \
        or html: one self-contained page (no network, no external assets) with a per-turn \
        timeline, e.g. `turnwal show S --format html > s.html`."
    )]
    Show(ShowArgs),
    /// Search the stored events of every session for a pattern.
    #[command(
        long_about = "Search the stored events of every session (or of --session ones) for \
        PATTERN, a regular expression (Rust's regex syntax; -F for a plain string, -i to \
        ignore case) matched against each event's data as stored (JSON text). Prints a line \
        per hit, SESSION:SEQ: turn N TYPE: snippet, sessions in natural order, as it reads \
        them.\n\n\
        --type T keeps events of type T (tool/* for every type starting with tool/; \
        repeatable); --errors keeps failed tool results and turns that ended in an error (no \
        PATTERN needed); --since keeps events from a time on (2h, 7d, 2026-12-01, \
        2026-12-01T08:30:00Z; UTC).\n\n\
        Exit status: 0 when something matched, 1 when nothing did (as grep), 2 or 4 when a \
        session could not be read (it is named on stderr and the others are searched)."
    )]
    Grep(GrepArgs),
    /// Delete a session and everything stored of it.
    #[command(
        long_about = "Delete a session and everything stored of it (its log file, or its \
        rows). Takes the session's writer lock first: a session another writer holds is \
        refused. There is no undo."
    )]
    Rm(RmArgs),
    /// Seal every closed turn of sessions into compressed units (the native
    /// WAL's format version 2), rewriting each log atomically.
    #[command(
        long_about = "Seal every closed turn of the given sessions (or of every session, \
        with --all) into zstd-compressed units, rewriting each log whole and atomically \
        under its writer lock (docs/FORMAT.md, \"Sealing and compaction\"). A version-1 log \
        becomes version 2. Every event reads back byte for byte as before. A session a \
        crash left open is repaired first, as its next writer would.\n\n\
        Prints one line per session: `SESSION BEFORE -> AFTER bytes` (equal when there was \
        nothing to seal), or `SESSION unchanged (nothing to compact in this store)` for \
        stores without sealed units (SQLite, JSONL). The first session that fails stops \
        the command with its exit status (2 corrupt, 4 locked or any other error)."
    )]
    Compact(CompactArgs),
    /// Copy sessions from one store to another (any backend to any backend),
    /// losslessly.
    #[command(long_about = CONVERT_HELP)]
    Convert(ConvertArgs),
    /// Copy to DST what it lacks of SRC's sessions (new sessions whole,
    /// grown ones by their new events); with --watch, keep doing it.
    #[command(long_about = SYNC_HELP)]
    Sync(SyncArgs),
    /// Write a sample store, crash a writer mid-turn, and recover it.
    #[command(
        long_about = "Write a sample store, crash a writer mid-turn, and recover it.\n\n\
        Uses --store if it names an empty or missing directory, else a new temporary \
        directory, which is left in place to explore afterwards."
    )]
    Demo,
    /// Measure turnwal against its baselines on this machine's disk.
    #[command(
        long_about = "Measure turnwal against its baselines on this machine's disk: buffered \
        append vs plain writes of the same bytes and vs a JSONL writer, ingest from JSON text \
        vs serde_json's bare validation, durable turns vs write+fdatasync and vs SQLite, \
        recovery scan vs mmap+CRC-32 and vs parsing JSONL, and tail reads. Buffered append, \
        durable turns and the recovery scan also run on turnwal's SQLite backend \
        (turnwal_sqlite_* rows, with ratios of their own). Each figure is the median of \
        repeated runs; a ratio is turnwal's speed over the baseline's.\n\n\
        Runs in a new temporary directory inside --store (if given) or the system temp dir, \
        removed afterwards. --quick takes 15 to 25 seconds (more on a busy machine); without \
        it the fixtures are larger (a 256 MiB log, copied into SQLite too, a session of a \
        million events: about 1.8 GB written) and it takes a minute or two."
    )]
    Bench(BenchArgs),
    /// Print a shell completion script (generated from this command line).
    #[command(
        long_about = "Print a completion script for SHELL on stdout, generated from the \
        same definition as --help. For bash: `turnwal completions bash > \
        ~/.local/share/bash-completion/completions/turnwal`; zsh: into a directory on \
        $fpath as _turnwal; fish: ~/.config/fish/completions/turnwal.fish."
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff), generated from this command line.
    #[command(
        long_about = "Print turnwal(1), the man page, as roff on stdout, generated from the \
        same definition as --help: `turnwal man > ~/.local/share/man/man1/turnwal.1` (then \
        `man turnwal`), or `turnwal man | man -l -` to read it now."
    )]
    Man,
}

/// `turnwal completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `turnwal bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Smaller fixtures and fewer runs: under 30 seconds.
    #[arg(long)]
    pub quick: bool,
    /// One JSON object (a `ratios` map, targets, every side's figures).
    #[arg(long)]
    pub json: bool,
    /// Measure the PostgreSQL store on the database at this URL instead
    /// (docs/POSTGRES.md, "Figures"): durable turns and appends against
    /// bare inserts and the SQLite backend, tail reads and reopens by
    /// session length, listing 10,000 sessions. It writes sessions into
    /// that database (use a scratch one).
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
    /// Measure only the live feed and sync (docs/PERFORMANCE.md, "Follow
    /// and sync"): follow latency from the writer's acknowledgement and an
    /// idle follower's CPU on the WAL, SQLite and JSONL stores (and the
    /// PostgreSQL database at --postgres, when given), and a realistic
    /// session synced from the WAL to each and back.
    #[arg(long)]
    pub feed: bool,
    /// Time only the whole-session reads of a realistic session of this
    /// many megabytes of raw JSONL on every store (verify, cat, export,
    /// stats, grep, show against serde_json's validation of the same
    /// lines), as a table or, with --json, one object.
    #[arg(long, value_name = "MB", conflicts_with = "postgres")]
    pub realistic_mb: Option<u64>,
    /// Measure only the bytes of live sessions of these many realistic
    /// turns (comma-separated, e.g. 500,2000), appended by one
    /// `turnwal append --sync turn` process per 10 turns and never
    /// compacted by hand, against upstream's zstd and raw JSONL of the same
    /// events, as a table or, with --json, one object.
    #[arg(long, value_name = "TURNS", value_delimiter = ',', conflicts_with_all = ["postgres", "realistic_mb"])]
    pub live_turns: Option<Vec<usize>>,
    /// Measure only this many sessions written at once, each by its own
    /// `turnwal append --sync turn` process (all started together) into
    /// one WAL store, against plain writers (a write and an fdatasync per
    /// turn) and the same processes into one SQLite store; median of 3
    /// runs (1 with --quick).
    #[arg(long, value_name = "SESSIONS", conflicts_with_all = ["postgres", "realistic_mb", "live_turns"])]
    pub concurrent: Option<usize>,
    /// Realistic turns each concurrent session appends (with --concurrent).
    #[arg(
        long,
        value_name = "TURNS",
        default_value_t = 20,
        requires = "concurrent"
    )]
    pub concurrent_turns: usize,
}

/// `turnwal convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The store to copy from (any form --store takes).
    #[arg(long, value_name = "STORE")]
    pub from: String,
    /// The store to copy into (created if missing).
    #[arg(long, value_name = "STORE")]
    pub to: String,
    /// The sessions to copy; every session of the source when none is named.
    #[arg(value_name = "SESSION", value_parser = parse_id)]
    pub sessions: Vec<String>,
    /// One JSON object per session (copied or not), no summary line.
    #[arg(long)]
    pub json: bool,
    /// Skip a session the destination already holds (a re-run after an
    /// interrupted convert) instead of reporting it as not copied.
    #[arg(long)]
    pub skip_existing: bool,
}

/// `turnwal sync`.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The store to copy from (any form --store takes); only read.
    #[arg(value_name = "SRC")]
    pub src: String,
    /// The store to copy into (created if missing).
    #[arg(value_name = "DST")]
    pub dst: String,
    /// The sessions to sync.
    #[arg(value_name = "SESSION", value_parser = parse_id, required_unless_present = "all")]
    pub sessions: Vec<String>,
    /// Every session of SRC (with --watch: those created later too).
    #[arg(long, conflicts_with = "sessions")]
    pub all: bool,
    /// Keep syncing as SRC's sessions grow, until interrupted (notified
    /// like `tail --follow`).
    #[arg(long)]
    pub watch: bool,
    /// Compare every event DST holds with SRC's, not only its last one
    /// (reads both sessions whole).
    #[arg(long)]
    pub verify: bool,
    /// One JSON object per session synced (or refused), no summary line.
    #[arg(long)]
    pub json: bool,
}

/// `turnwal append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// Create the session (it must not exist); without it, it must exist.
    #[arg(long)]
    pub create: bool,
    /// The new session's working directory (absolute). Needs --create.
    #[arg(long, value_name = "DIR", requires = "create")]
    pub cwd: Option<String>,
    /// When events become durable and are acknowledged.
    #[arg(long, value_enum, default_value_t = SyncArg::Turn)]
    pub sync: SyncArg,
    /// Create the session with the lenient policy (plugin events may sit
    /// between turns). Needs --create.
    #[arg(long, requires = "create")]
    pub lenient: bool,
    /// Continue a turn an earlier `append` left open instead of closing it
    /// as interrupted: the input's first event goes into the open turn.
    /// Refuses a log with torn bytes to cut (run `recover` first).
    #[arg(long = "continue", conflicts_with = "create")]
    pub continue_turn: bool,
    /// Print no `ack SEQ` lines (errors still go to stderr; the exit
    /// status says whether everything was stored).
    #[arg(short, long)]
    pub quiet: bool,
    /// Take the session even from a live writer's lease (a PostgreSQL
    /// store; that writer is refused from its next batch). A file store's
    /// lock belongs to a live process and is never taken.
    #[arg(long, conflicts_with = "create")]
    pub steal: bool,
}

/// The `--sync` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyncArg {
    /// fsync each batch that holds a turn/end.
    Turn,
    /// fsync every batch.
    Batch,
    /// Never fsync before end of input; acknowledge once written.
    Never,
}

impl From<SyncArg> for SyncMode {
    fn from(arg: SyncArg) -> SyncMode {
        match arg {
            SyncArg::Turn => SyncMode::Turn,
            SyncArg::Batch => SyncMode::Batch,
            SyncArg::Never => SyncMode::Never,
        }
    }
}

/// `turnwal cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// Print only events with seq >= SEQ.
    #[arg(long, value_name = "SEQ")]
    pub from: Option<u64>,
    /// Print the stored events as they are, without the closers a crashed
    /// session would get.
    #[arg(long, conflicts_with = "salvage")]
    pub raw: bool,
    /// Print every intact event, those after a damaged region included, as
    /// stored; name each unusable region (byte range, seqs lost) on stderr.
    /// Exits 2 when there was damage. Writes nothing.
    #[arg(long)]
    pub salvage: bool,
}

/// `turnwal verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The session id; every session when absent.
    #[arg(value_parser = parse_id)]
    pub session: Option<String>,
    /// One JSON object per session.
    #[arg(long)]
    pub json: bool,
    /// Also check the store's own structure where its format allows more
    /// than reading every log: SQLite's `PRAGMA integrity_check` (pages,
    /// indexes, the freelist). Damage found exits 2.
    #[arg(long)]
    pub deep: bool,
    /// Print only the sessions that are not clean (the summary still counts
    /// every session).
    #[arg(long)]
    pub problems_only: bool,
}

/// `turnwal recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The session id.
    #[arg(value_parser = parse_id, required_unless_present = "all")]
    pub session: Option<String>,
    /// Every session that is not clean (a corrupt one is refused and
    /// named, unless --salvage, and the others are still recovered).
    #[arg(long, conflicts_with = "session")]
    pub all: bool,
    /// Show what would be cut and appended; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Make a corrupt session usable again: keep the longest valid prefix,
    /// close its open turn, and cut everything from the first damaged byte
    /// on (acknowledged or not), after keeping it in a quarantine file.
    /// Without it, recover refuses a corrupt session (exit 2) and changes
    /// nothing.
    #[arg(long)]
    pub salvage: bool,
    /// Take the session even from a live writer's lease (a PostgreSQL
    /// store; that writer is refused from its next batch). For a holder
    /// known to be gone or stuck. A file store's lock belongs to a live
    /// process and is never taken.
    #[arg(long, requires = "session")]
    pub steal: bool,
}

/// `turnwal ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// One JSON object per session: the listing's figures and every header
    /// field (times in unix ms).
    #[arg(long)]
    pub json: bool,
    /// Order (newest, largest, most first)
    #[arg(long, value_enum, default_value_t = LsSort::Id)]
    pub sort: LsSort,
    /// Only sessions in this state: clean, open-turn, torn, corrupt, or
    /// live (a writer holds it)
    /// (repeatable).
    #[arg(long, value_name = "STATE")]
    pub state: Vec<String>,
    /// Only sessions active from this time on: 2h, 7d, 2026-12-01 (UTC).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only sessions whose cwd is DIR or inside it.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<String>,
    /// At most N sessions (after sorting and filtering).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// `ls --sort`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LsSort {
    /// Natural order of ids.
    Id,
    /// Last activity, newest first.
    Activity,
    /// Creation time, newest first.
    Created,
    /// Bytes stored, largest first.
    Size,
    /// Events stored, most first.
    Events,
}

/// `turnwal du`.
#[derive(Debug, Args)]
pub struct DuArgs {
    /// One JSON object per session, and a last `{"total":…}` line.
    #[arg(long)]
    pub json: bool,
}

/// `turnwal prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove sessions last active longer ago than this: 90m, 12h, 30d, 2w.
    #[arg(long, value_name = "DURATION", conflicts_with = "keep")]
    pub older_than: Option<String>,
    /// Keep the N most recently active sessions, remove the rest.
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Name what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `turnwal export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// Write into this file (whole or not at all) instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Write the session as the upstream JSONL backend's log text instead:
    /// its header line, then the stored events' records (chunk-delta runs
    /// packed), as one append of them writes it — the stored events only
    /// (an open turn as stored, no closers). This is what the dsh app's
    /// session export holds through turnwal-dsh, and what upstream's tools
    /// read as a session.jsonl.
    #[arg(long)]
    pub jsonl: bool,
}

/// `turnwal import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The export file (`-`: stdin).
    pub file: std::path::PathBuf,
    /// Import under this id instead of the file's.
    #[arg(long = "as", value_name = "ID", value_parser = parse_id)]
    pub as_id: Option<String>,
}

/// `turnwal head`.
#[derive(Debug, Args)]
pub struct HeadArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// The header as the JSON object the log stores.
    #[arg(long)]
    pub json: bool,
}

/// `turnwal stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The session; every session and the store's total when omitted.
    #[arg(value_parser = parse_id)]
    pub session: Option<String>,
    /// One JSON object per session (and a last `{"total":…}` line for the
    /// whole store).
    #[arg(long)]
    pub json: bool,
}

/// `turnwal grep`.
#[derive(Debug, Args)]
pub struct GrepArgs {
    /// The regular expression (or, with -F, the text) to find.
    pub pattern: Option<String>,
    /// Only events of this type (`tool/*`: every type that starts so).
    #[arg(long = "type", value_name = "TYPE")]
    pub types: Vec<String>,
    /// Only failed tool results and turns that ended in an error.
    #[arg(long)]
    pub errors: bool,
    /// Only this session (repeatable).
    #[arg(long = "session", value_name = "SESSION", value_parser = parse_id)]
    pub sessions: Vec<String>,
    /// Only events from this time on: 2h, 7d, 2026-12-01, 2026-12-01T08:30Z.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// PATTERN is plain text, not a regular expression.
    #[arg(short = 'F', long)]
    pub fixed_strings: bool,
    /// Ignore case.
    #[arg(short, long)]
    pub ignore_case: bool,
    /// One JSON object per hit.
    #[arg(long)]
    pub json: bool,
}

/// `turnwal show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// Only this turn.
    #[arg(long, value_name = "N")]
    pub turn: Option<u64>,
    /// How to write it.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
}

/// The `--format` values of `show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// Plain text (coloured on a terminal).
    Text,
    /// Markdown.
    Markdown,
    /// One self-contained HTML page.
    Html,
}

/// `turnwal fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session to copy from.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// The new session's id.
    #[arg(value_parser = parse_id)]
    pub child: String,
    /// Copy events 0..=SEQ (default: all); SEQ must not be inside a turn.
    #[arg(long, value_name = "SEQ")]
    pub at: Option<u64>,
}

/// `turnwal rm`.
#[derive(Debug, Args)]
pub struct RmArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
}

/// `turnwal compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The sessions to compact.
    #[arg(value_parser = parse_id, required_unless_present = "all", conflicts_with = "all")]
    pub sessions: Vec<String>,
    /// Compact every session of the store.
    #[arg(long)]
    pub all: bool,
}

/// `turnwal tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// The session id.
    #[arg(value_parser = parse_id)]
    pub session: String,
    /// How many of the last stored events to print.
    #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 10)]
    pub lines: usize,
    /// Keep printing events as they are appended (by this or another
    /// process or host), until interrupted; stop (exit 4) if the session
    /// is removed or replaced by a new one.
    #[arg(long)]
    pub follow: bool,
    /// Print the stored events from this seq on instead of the last `-n`
    /// (with `--follow`: follow from there; past the end: wait for it).
    #[arg(long, value_name = "SEQ", conflicts_with = "lines")]
    pub from: Option<u64>,
    /// One JSON object per line, `{"session","next","event"}`: `next` is
    /// the seq to resume from (`--from NEXT`); a follow that stops prints
    /// `{"session","next","stopped"}` last.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
