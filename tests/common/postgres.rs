//! A throwaway PostgreSQL cluster for the sync tests: `initdb` in a temporary directory (as
//! the unprivileged `postgres` user when the tests run as root), `postgres` on a free port
//! of 127.0.0.1 with TLS on (a test CA and a server certificate for `localhost` and
//! 127.0.0.1, made with `openssl`), a password-protected superuser. One cluster is shared by
//! every test of the process ([`shared`]), each test in its own database ([`Cluster::database`]);
//! a test that restarts the server starts its own ([`Cluster::start`]). A watchdog process
//! stops the server and removes its directory when the test process is gone. With
//! `PI_TEST_PG_URL` set (a superuser URL without a database), that server is used instead
//! and nothing is started.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The superuser's name and password in a started cluster.
pub const SUPERUSER: &str = "pi_admin";
/// Its password.
pub const PASSWORD: &str = "pi-test-secret";

/// A running cluster.
pub struct Cluster {
    /// The port.
    pub port: u16,
    /// The data directory (none for `PI_TEST_PG_URL`).
    pub data: Option<PathBuf>,
    /// The CA certificate that signed the server's (PEM file).
    pub ca: Option<PathBuf>,
    /// The superuser URL without a database (`…/`).
    pub base_url: String,
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    root: PathBuf,
    /// The watchdog (outlives this process by design; kept so that it is not reaped early).
    watchdog: Option<std::process::Child>,
}

fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path().join("bin")))
                .filter(|bin| bin.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|path| {
        path.parent()
            .and_then(|version| version.file_name())
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().expect(
        "PostgreSQL's server binaries under /usr/lib/postgresql (.ci/run installs postgresql)",
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

fn run(cmd: &mut Command, what: &str) {
    let output = cmd.output().unwrap_or_else(|err| panic!("{what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
}

impl Cluster {
    /// A command run as the cluster's owner.
    fn as_owner(&self, program: &Path) -> Command {
        match self.owner {
            Some((uid, gid)) => {
                let mut cmd = Command::new("setpriv");
                cmd.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    /// Starts a new cluster (its own data directory, port and certificates).
    pub fn start() -> Self {
        let bin = bin_dir();
        let root =
            std::env::temp_dir().join(format!("pi-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&root).unwrap();
        let owner = if nix::unistd::geteuid().is_root() {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .expect("a postgres user (the postgresql package creates it)");
            Some((user.uid.as_raw(), user.gid.as_raw()))
        } else {
            None
        };
        let data = root.join("data");
        let pwfile = root.join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        // Certificates: a CA, and a server certificate for localhost and 127.0.0.1 it signed.
        let ca_key = root.join("ca.key");
        let ca = root.join("ca.pem");
        run(
            Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3", "-subj",
                ])
                .arg("/CN=pi test CA")
                .arg("-keyout")
                .arg(&ca_key)
                .arg("-out")
                .arg(&ca)
                .stderr(Stdio::piped()),
            "openssl (CA)",
        );
        let key = root.join("server.key");
        let csr = root.join("server.csr");
        let crt = root.join("server.crt");
        run(
            Command::new("openssl")
                .args([
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-subj",
                    "/CN=localhost",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&csr)
                .stderr(Stdio::piped()),
            "openssl (server key)",
        );
        let ext = root.join("ext.cnf");
        std::fs::write(
            &ext,
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(
            Command::new("openssl")
                .args(["x509", "-req", "-days", "3", "-CAcreateserial"])
                .arg("-in")
                .arg(&csr)
                .arg("-CA")
                .arg(&ca)
                .arg("-CAkey")
                .arg(&ca_key)
                .arg("-out")
                .arg(&crt)
                .arg("-extfile")
                .arg(&ext)
                .stderr(Stdio::piped()),
            "openssl (server certificate)",
        );
        if let Some((uid, gid)) = owner {
            for path in [&root, &pwfile, &key, &crt] {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
            }
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let port = free_port();
        let mut cluster = Self {
            port,
            data: Some(data.clone()),
            ca: Some(ca),
            base_url: format!("postgres://{SUPERUSER}:{PASSWORD}@127.0.0.1:{port}/"),
            bin: bin.clone(),
            owner,
            root: root.clone(),
            watchdog: None,
        };
        run(
            cluster
                .as_owner(&bin.join("initdb"))
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    SUPERUSER,
                    "--auth=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ])
                .arg(format!("--pwfile={}", pwfile.display())),
            "initdb",
        );
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\nfsync = off\nfull_page_writes = off\nmax_connections = 60\nssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nlog_min_messages = warning\n",
            root.display(),
            crt.display(),
            key.display()
        );
        let conf_path = data.join("postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&conf_path).unwrap_or_default();
        text.push_str(&conf);
        std::fs::write(&conf_path, text).unwrap();
        cluster.start_server();
        cluster.watchdog();
        cluster.port = port;
        cluster
    }

    /// Makes a CA certificate in `dir` that signed nothing this cluster uses.
    pub fn other_ca(dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let ca = dir.join("other-ca.pem");
        run(
            Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3", "-subj",
                ])
                .arg("/CN=another CA")
                .arg("-keyout")
                .arg(dir.join("other-ca.key"))
                .arg("-out")
                .arg(&ca)
                .stderr(Stdio::piped()),
            "openssl (other CA)",
        );
        ca
    }

    /// Starts the server of this cluster's data directory and waits until it accepts
    /// connections.
    pub fn start_server(&self) {
        let Some(data) = &self.data else { return };
        run(
            self.as_owner(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(data)
                .arg("-l")
                .arg(self.root.join("server.log"))
                .args(["-w", "-t", "60", "start"])
                .stdout(Stdio::null()),
            "pg_ctl start",
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the test PostgreSQL server did not start");
    }

    /// Stops the server at once (connections are cut, as a crash or a restart cuts them).
    pub fn stop_server(&self) {
        let Some(data) = &self.data else { return };
        run(
            self.as_owner(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(data)
                .args(["-w", "-m", "immediate", "stop"])
                .stdout(Stdio::null()),
            "pg_ctl stop",
        );
    }

    /// A process that stops the server and removes the directory once this test process
    /// has exited.
    fn watchdog(&mut self) {
        let Some(data) = &self.data else { return };
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = match self.owner {
            Some((uid, gid)) => format!(
                "setpriv --reuid={uid} --regid={gid} --clear-groups {} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            ),
            None => format!(
                "{} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            ),
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {root}",
            pid = std::process::id(),
            root = self.root.display()
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the cluster's watchdog");
        self.watchdog = Some(child);
    }

    /// Creates a new database and returns its superuser URL (TLS off unless the caller adds
    /// `sslmode`; the password in the URL).
    pub fn database(&self, name: &str) -> String {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let db = format!("pi_{name}_{}_{n}", std::process::id());
        self.psql("postgres", &format!("CREATE DATABASE {db}"));
        format!("{}{db}", self.base_url)
    }

    /// Runs SQL as the superuser in `db` (a database name or a URL) and returns its
    /// unaligned, tuples-only output.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let url = if db.starts_with("postgres://") {
            db.to_owned()
        } else {
            format!("{}{db}", self.base_url)
        };
        let output = Command::new("psql")
            .arg(format!("{url}?sslmode=disable"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .env_remove("PGPASSWORD")
            .output()
            .expect("psql (the postgresql package installs it)");
        assert!(
            output.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

/// The cluster shared by every test of this process (started at first use).
pub fn shared() -> &'static Cluster {
    static SHARED: OnceLock<Cluster> = OnceLock::new();
    SHARED.get_or_init(|| match std::env::var("PI_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => {
            let base_url = if url.ends_with('/') {
                url
            } else {
                format!("{url}/")
            };
            let host = base_url
                .rsplit_once('@')
                .map(|(_, rest)| rest.trim_end_matches('/').to_owned())
                .unwrap_or_default();
            let port = host
                .rsplit_once(':')
                .and_then(|(_, port)| port.parse().ok())
                .unwrap_or(5432);
            Cluster {
                port,
                data: None,
                ca: None,
                base_url,
                bin: PathBuf::new(),
                owner: None,
                root: std::env::temp_dir(),
                watchdog: None,
            }
        }
        _ => Cluster::start(),
    })
}
