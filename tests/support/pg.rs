//! A throwaway PostgreSQL cluster for the tests (docs/POSTGRES.md,
//! "Tests"): Debian's server, `initdb` into a temporary directory as a
//! non-root user, listening only on a Unix socket there, stopped and
//! removed when dropped.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A running throwaway cluster; stopped and removed on drop.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    bin: PathBuf,
    /// The user the server runs as, when the tests run as root.
    run_as: Option<(u32, u32)>,
    pub user: String,
}

/// The newest PostgreSQL server installed the Debian way.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Debian's postgresql installed (scripts/test installs it)")
        .map(|e| e.unwrap().path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL server with initdb")
}

/// Who runs the server: PostgreSQL refuses root, so as root the tests use
/// the `postgres` system user (or `nobody`), else the current user.
fn server_user() -> (Option<(u32, u32)>, String) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let name = std::env::var("USER").unwrap_or_else(|_| "postgres".into());
        return (None, name);
    }
    for name in ["postgres", "nobody"] {
        let cname = std::ffi::CString::new(name).unwrap();
        // SAFETY: a valid C string; the result is read before any other call.
        let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
        if !pw.is_null() {
            // SAFETY: non-null, as getpwnam returned it.
            let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
            return (Some((uid, gid)), name.to_owned());
        }
    }
    panic!("running as root and no postgres or nobody user to run the server as");
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with("")
    }

    /// [`Cluster::start`], with more server options (`-c name=value …`).
    pub fn start_with(options: &str) -> Cluster {
        let cluster = Cluster::empty();
        let data = cluster.data();
        let out = cluster
            .command("initdb")
            .args(["-D", data.to_str().unwrap(), "-U", &cluster.user])
            .args(["--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.start_server(options);
        cluster
    }

    /// A streaming-replication standby of `primary` (a base backup of it,
    /// following its WAL), named `name` (its `cluster_name`, which the
    /// primary's `synchronous_standby_names` can name), started.
    pub fn standby_of(primary: &Cluster, name: &str) -> Cluster {
        let cluster = Cluster::empty();
        let out = cluster
            .command("pg_basebackup")
            .args(["-D", cluster.data().to_str().unwrap()])
            .args(["-h", primary.dir.path().to_str().unwrap()])
            .args(["-U", &primary.user, "-R", "-X", "stream", "--no-sync"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_basebackup: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.start_server(&format!("-c cluster_name={name} -c hot_standby=on"));
        cluster
    }

    /// Promotes a standby to a primary (`pg_ctl promote`, waiting for it).
    pub fn promote(&self) {
        self.pg_ctl(&["-w", "-t", "60", "promote"]);
    }

    /// A temporary directory the server's user owns, for a data directory
    /// and the socket.
    fn empty() -> Cluster {
        let bin = pg_bin();
        let (run_as, user) = server_user();
        let dir = tempfile::Builder::new()
            .prefix("turnwal-pg-")
            .tempdir()
            .unwrap();
        if let Some((uid, gid)) = run_as {
            let path = std::ffi::CString::new(dir.path().to_str().unwrap()).unwrap();
            // SAFETY: a valid path.
            assert_eq!(unsafe { libc::chown(path.as_ptr(), uid, gid) }, 0);
        }
        Cluster {
            dir,
            bin,
            run_as,
            user,
        }
    }

    /// Starts the server on the data directory, listening only on a socket
    /// in the cluster's directory.
    fn start_server(&self, options: &str) {
        let options = format!(
            "-c listen_addresses='' -k {} -c fsync=on -c synchronous_commit=on {options}",
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        let out = self.run_pg_ctl(&[
            "-w",
            "-t",
            "60",
            "-o",
            &options,
            "-l",
            log.to_str().unwrap(),
            "start",
        ]);
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `pg_ctl -D DATA ARGS`, which must succeed.
    fn pg_ctl(&self, args: &[&str]) {
        let out = self.run_pg_ctl(args);
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `pg_ctl -D DATA ARGS`, its output.
    fn run_pg_ctl(&self, args: &[&str]) -> std::process::Output {
        self.command("pg_ctl")
            .args(["-D", self.data().to_str().unwrap()])
            .args(args)
            .stdout(Stdio::null())
            .output()
            .unwrap()
    }

    /// Kills the server as a power cut would (`pg_ctl stop -m immediate`:
    /// no checkpoint, recovery from its WAL at the next start).
    pub fn kill(&self) {
        self.pg_ctl(&["-w", "-m", "immediate", "stop"]);
    }

    /// Kills the server as a power cut would (`pg_ctl stop -m immediate`:
    /// no checkpoint, recovery from its WAL at the next start), then starts
    /// it again.
    pub fn crash_and_restart(&self) {
        self.kill();
        self.start_server("");
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.stdin(Stdio::null()).current_dir(self.dir.path());
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// A connection string for database `db` over the cluster's socket.
    pub fn url(&self, db: &str) -> String {
        format!(
            "host={} user={} dbname={db}",
            self.dir.path().display(),
            self.user
        )
    }

    /// Runs SQL as the superuser, outside turnwal.
    pub fn sql(&self, db: &str, sql: &str) {
        let mut client = postgres::Client::connect(&self.url(db), postgres::NoTls).unwrap();
        client.batch_execute(sql).unwrap();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One cluster shared by every test of this test binary that asks for it,
/// started on first use and stopped when the process exits (an `atexit`
/// handler: statics are never dropped).
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| {
        extern "C" fn stop() {
            if let Some(cluster) = SHARED.get() {
                cluster.stop();
                let _ = std::fs::remove_dir_all(cluster.dir.path());
            }
        }
        // SAFETY: `stop` is a plain function that lives for the process.
        unsafe { libc::atexit(stop) };
        Cluster::start()
    })
}

impl Cluster {
    /// A new, empty database of its own (UTF-8), named uniquely; its
    /// connection string.
    pub fn fresh_database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::Relaxed));
        self.sql(
            "postgres",
            &format!("CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0"),
        );
        self.url(&name)
    }

    /// [`Cluster::fresh_database`], named as `--store` takes it.
    pub fn fresh_store_url(&self) -> String {
        let url = self.fresh_database();
        let name = url.rsplit("dbname=").next().unwrap().to_owned();
        self.store_url(&name)
    }

    /// The URL form of [`Cluster::url`], as `--store` takes it.
    pub fn store_url(&self, db: &str) -> String {
        format!(
            "postgresql://{}@/{db}?host={}",
            self.user,
            self.dir.path().display()
        )
    }

    /// Stops the server (`pg_ctl stop -m fast`).
    pub fn stop(&self) {
        let _ = self.run_pg_ctl(&["-w", "-m", "fast", "stop"]);
    }
}
