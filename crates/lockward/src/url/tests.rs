//! The URL parser's tests: every scheme, redaction, and errors that name
//! the problem.

use super::*;

#[test]
fn embedded() {
    assert_eq!(StoreUrl::parse("memory://").unwrap(), StoreUrl::Memory);
    assert!(StoreUrl::parse("memory://x").is_err());
    assert_eq!(
        StoreUrl::parse("sqlite://").unwrap(),
        StoreUrl::Sqlite {
            path: DEFAULT_SQLITE_PATH.into()
        }
    );
    assert_eq!(
        StoreUrl::parse("sqlite:///var/lib/x.db").unwrap(),
        StoreUrl::Sqlite {
            path: "/var/lib/x.db".into()
        }
    );
    assert_eq!(
        StoreUrl::parse("sqlite://rel/my%20locks.db").unwrap(),
        StoreUrl::Sqlite {
            path: "rel/my locks.db".into()
        }
    );
    assert!(StoreUrl::parse("sqlite://a.db?x=1").is_err());
}

#[test]
fn redis_parts_and_redaction() {
    let url = StoreUrl::parse("rediss://u:p%40ss@[::1]:7000/3?prefix=x:").unwrap();
    let StoreUrl::Redis(r) = &url else {
        panic!("not redis: {url:?}")
    };
    assert!(r.tls);
    assert_eq!(r.endpoints[0].host, "::1");
    assert_eq!(r.endpoints[0].port, 7000);
    assert_eq!(r.db, 3);
    assert_eq!(r.password.as_ref().unwrap().expose(), "p@ss");
    assert!(!url.to_string().contains("p@ss"));
    assert!(!format!("{url:?}").contains("p@ss"));
    assert_eq!(url.to_string(), "rediss://u:***@[::1]:7000/3?prefix=x:");
}

#[test]
fn sentinels_and_the_primary_they_name() {
    let url = StoreUrl::parse(
        "redis+sentinel://app:pw@s1,s2:26380/pay-primary/2?prefix=p:&sentinel_user=watch&sentinel_password=s3cret",
    )
    .unwrap();
    let StoreUrl::Redis(r) = &url else {
        panic!("not redis: {url:?}")
    };
    let sentinel = r.sentinel.as_ref().expect("sentinels");
    assert_eq!(sentinel.primary, "pay-primary");
    assert_eq!(sentinel.user.as_deref(), Some("watch"));
    assert_eq!(
        sentinel.password.as_ref().map(|p| p.expose()),
        Some("s3cret")
    );
    assert_eq!((r.endpoints[0].port, r.endpoints[1].port), (26379, 26380));
    assert_eq!(
        (r.db, r.cluster, r.user.as_deref()),
        (2, false, Some("app"))
    );
    assert_eq!(
        url.to_string(),
        "redis+sentinel://app:***@s1:26379,s2:26380/pay-primary/2?prefix=p:&sentinel_user=watch&sentinel_password=***"
    );
    assert_eq!(
        StoreUrl::parse("rediss+sentinel://s1/p?ca=/x/ca.pem")
            .unwrap()
            .scheme(),
        "rediss+sentinel"
    );
    for bad in [
        "redis+sentinel://s1",
        "redis+sentinel://s1/",
        "redis+sentinel://s1/p/x",
        "redis+sentinel://s1/p?ca=/x",
        "redis://h?sentinel_password=x",
    ] {
        assert!(StoreUrl::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn cluster_seeds() {
    let url = StoreUrl::parse("redis+cluster://a:1,b:2,c?prefix=x:").unwrap();
    let StoreUrl::Redis(r) = &url else {
        panic!("not redis: {url:?}")
    };
    assert!(r.cluster);
    assert_eq!(r.endpoints.len(), 3);
    assert_eq!(r.endpoints[2].port, 6379);
    assert_eq!(url.to_string(), "redis+cluster://a:1,b:2,c:6379?prefix=x:");
    assert!(StoreUrl::parse("redis+cluster://a:1/2").is_err());
    assert!(StoreUrl::parse("redis+cluster://").is_err());
    let tls = StoreUrl::parse("rediss+cluster://a:1?ca=/x/ca.pem").unwrap();
    assert_eq!(tls.scheme(), "rediss+cluster");
    assert!(
        StoreUrl::parse("redis://a:1?ca=/x").is_err(),
        "ca= needs TLS"
    );
    assert!(
        StoreUrl::parse("rediss://a:1?cert=/c").is_err(),
        "cert without key"
    );
}

#[test]
fn redlock_masters() {
    let url = StoreUrl::parse("redlock://:pw@a:1,b:2,c:3").unwrap();
    let StoreUrl::Redlock(r) = &url else {
        panic!("not redlock: {url:?}")
    };
    assert_eq!(r.masters.len(), 3);
    assert_eq!(url.to_string(), "redlock://:***@a:1,b:2,c:3");
    for bad in [
        "redlock://a:1",
        "redlock://a:1,b:2",
        "redlock://a:1,b:2,c:3,d:4",
    ] {
        let err = StoreUrl::parse(bad).unwrap_err().to_string();
        assert!(err.contains("odd number"), "{bad}: {err}");
    }
}

#[test]
fn etcd_endpoints() {
    let url = StoreUrl::parse("etcd://root:pw@a,b:2380?prefix=").unwrap();
    let StoreUrl::Etcd(e) = &url else {
        panic!("not etcd: {url:?}")
    };
    assert_eq!(e.endpoints[0].port, 2379);
    assert_eq!(e.prefix, "");
    assert_eq!(url.to_string(), "etcd://root:***@a:2379,b:2380?prefix=");
    assert!(StoreUrl::parse("etcd://a/x").is_err());
    assert!(StoreUrl::parse("etcd://u@a").is_err());
}

#[test]
fn postgres_parts() {
    let url = StoreUrl::parse("postgres://app:pw@db:6000/pay?mode=advisory&table=locks_2").unwrap();
    let StoreUrl::Postgres(p) = &url else {
        panic!("not postgres: {url:?}")
    };
    assert_eq!(
        (p.user.as_str(), p.db.as_str(), p.table.as_str()),
        ("app", "pay", "locks_2")
    );
    assert_eq!(p.mode, PostgresMode::Advisory);
    assert_eq!(
        url.to_string(),
        "postgres://app:***@db:6000/pay?table=locks_2&mode=advisory"
    );
    for bad in [
        "postgres://db/x",
        "postgres://u@db?table=Bad",
        "postgres://u@db?table=x;drop",
        "postgres://u@db?mode=x",
    ] {
        assert!(StoreUrl::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn mysql_parts() {
    let url = StoreUrl::parse(
        "mariadb://app:pw@db:3307/shop?mode=named&table=locks_2&ssl-mode=verify_identity&ca=/etc/ca.pem",
    )
    .unwrap();
    let StoreUrl::Mysql(m) = &url else {
        panic!("not mysql: {url:?}")
    };
    assert_eq!(
        (
            m.user.as_str(),
            m.db.as_str(),
            m.table.as_str(),
            m.endpoint.port
        ),
        ("app", "shop", "locks_2", 3307)
    );
    assert_eq!(m.mode, MysqlMode::Named);
    assert_eq!(m.ssl_mode, MysqlSslMode::VerifyIdentity);
    assert_eq!(url.scheme(), "mysql");
    assert_eq!(
        url.to_string(),
        "mysql://app:***@db:3307/shop?table=locks_2&mode=named&ssl-mode=VERIFY_IDENTITY&ca=/etc/ca.pem"
    );
    // The named mode keeps its rows apart by default; the port defaults.
    let StoreUrl::Mysql(n) = StoreUrl::parse("mysql://u@db/x?mode=named").unwrap() else {
        panic!()
    };
    assert_eq!(
        (n.table.as_str(), n.endpoint.port),
        ("lockward_named", 3306)
    );
    for bad in [
        "mysql://db/x",
        "mysql://u@db",
        "mysql://u@db/x?table=Bad",
        "mysql://u@db/x?table=x;drop",
        "mysql://u@db/x?mode=advisory",
        "mysql://u@db/x?ssl-mode=PREFERRED",
        "mysql://u@db/x?ca=/etc/ca.pem",
    ] {
        assert!(StoreUrl::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn errors_name_the_problem() {
    for (url, needle) in [
        ("nope", "scheme"),
        ("ftp://x", "unknown scheme"),
        ("redis://", "needs a host"),
        ("redis://h:99999", "port"),
        ("redis://h:1/abc", "database index"),
        ("redis://h:1?foo=1", "unknown parameter"),
        ("redis://a:1,b:2", "redlock"),
        ("sqlite://a%zz", "hex"),
    ] {
        let err = StoreUrl::parse(url).unwrap_err().to_string();
        assert!(err.contains(needle), "{url}: {err}");
    }
    for (url, needle) in [
        ("zk://", "at least one host"),
        ("zk://u@h", "both a user and a password"),
        ("zk://h/a//b", "segment"),
        ("zk://h/a/..", "segment"),
        ("zk://h?session_timeout=soon", "session_timeout"),
        ("zk://h?session_timeout=5ms", "at least 100ms"),
        ("zk://h?prefix=x", "unknown parameter"),
    ] {
        let err = StoreUrl::parse(url).unwrap_err().to_string();
        assert!(err.contains(needle), "{url}: {err}");
    }
}

#[test]
fn zookeeper_urls() {
    let url = StoreUrl::parse("zk://app:pw@a:2181,b/svc/locks/?session_timeout=5s").unwrap();
    let StoreUrl::Zookeeper(z) = &url else {
        panic!("{url:?}")
    };
    assert_eq!(z.endpoints.len(), 2);
    assert_eq!(z.endpoints[1].port, 2181);
    assert_eq!(z.chroot, "/svc/locks");
    assert_eq!(z.session_timeout, std::time::Duration::from_secs(5));
    assert_eq!(
        url.to_string(),
        "zk://app:***@a:2181,b:2181/svc/locks?session_timeout=5000ms"
    );
    let plain = StoreUrl::parse("zk://h").unwrap();
    assert_eq!(plain.to_string(), "zk://h:2181");
}

#[test]
fn password_never_in_errors() {
    for url in [
        "redis://u:hunter2@h:notaport",
        "redis://u:hunter2",
        "redis://u:hunter2@",
    ] {
        let err = StoreUrl::parse(url).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }
}

#[test]
fn hosts_must_be_hosts() {
    for bad in [
        "redis+cluster://u:pw127.0.0.1:1,127.0.0.1:2",
        "redis://127[0.0.1:1",
        "redis://[nothex]:1",
        "redis://[::1",
        "redis://-bad:1",
        "redis://a..b:1",
        "redis://a b:1",
        "etcd://h1,h%2:1",
    ] {
        let err = StoreUrl::parse(bad).unwrap_err().to_string();
        assert!(err.contains("url"), "{bad}: {err}");
    }
    for good in [
        "redis://127.0.0.1:6379",
        "redis://[::1]:7000",
        "redis://cache-1.prod.example.com",
        "redis://my_service:6379",
        "etcd://a:1,b:2,c",
    ] {
        assert!(StoreUrl::parse(good).is_ok(), "{good}");
    }
}

#[test]
fn no_error_quotes_the_user_information() {
    for url in [
        "redis+cluster://u:pw127.0.0.1:1,127.0.0.1:2",
        "redis://u:hunter2/xyz@h:1",
        "redis://u:hunter2@h:1/notanumber",
        "redis://u:hunter2@h:notaport",
        "redis://u:hunter2@[::1",
        "postgres://u:hunter2@h/db?table=Bad",
        "etcd://u:hunter2@h/x",
        "zk://u:hunter2@h/a//b",
        "redlock://u:hunter2@a:1,b:2",
        "redis://u:p%zz@h",
        // Found by tests/fuzz.rs: a '/' in the password made its tail a chroot.
        "zk://app:1/&0A;@h",
    ] {
        let err = StoreUrl::parse(url).unwrap_err().to_string();
        for secret in ["hunter2", "pw127", "xyz", "&0A;"] {
            assert!(!err.contains(secret), "{url}: {err}");
        }
    }
}

#[test]
fn a_url_pasted_twice_is_redacted_in_both_copies() {
    // The second copy's user information lands inside a parameter's name
    // or value, which the error quotes; its password must not show.
    for url in [
        "postgres://app:SECRET1@h/db?sslmodepostgres://app:SECRET2@h/db",
        "postgres://app@h/db?sslmode=requirepostgres://app:SECRET2@h/db",
        "redis://h:1?prefixredis://u:SECRET2@h:1",
        "mysql://app:SECRET1@h/db?tablemysql://app:SECRET2@h/db",
        "etcd://h:1?x=etcd://u:SECRET2@h:1,k8s://a:SECRET3@b",
    ] {
        let err = StoreUrl::parse(url).unwrap_err().to_string();
        for secret in ["SECRET1", "SECRET2", "SECRET3"] {
            assert!(!err.contains(secret), "{url}: {err}");
        }
    }
    // A user name alone is no secret: it stays readable.
    let err = StoreUrl::parse("postgres://h/db?x-postgres://app@h/db")
        .unwrap_err()
        .to_string();
    assert!(err.contains("app@h"), "{err}");
}

#[test]
fn zookeeper_over_tls() {
    let url =
        StoreUrl::parse("zks://app:pw@a:2182/svc?ca=/x/ca.pem&cert=/x/c.pem&key=/x/k.pem").unwrap();
    let StoreUrl::Zookeeper(z) = &url else {
        panic!("{url:?}")
    };
    assert!(z.tls);
    assert_eq!(z.ca.as_deref(), Some(std::path::Path::new("/x/ca.pem")));
    assert_eq!(z.tls_files().len(), 3);
    assert_eq!(url.scheme(), "zks");
    assert_eq!(
        url.to_string(),
        "zks://app:***@a:2182/svc?ca=/x/ca.pem&cert=/x/c.pem&key=/x/k.pem"
    );
    assert!(
        StoreUrl::parse("zk://a?ca=/x/ca.pem").is_err(),
        "ca= needs zks://"
    );
    assert!(
        StoreUrl::parse("zks://a?cert=/c").is_err(),
        "cert without key"
    );
}

#[test]
fn kubernetes_parts() {
    let url =
        StoreUrl::parse("k8s://team-a?kubeconfig=/etc/kc&context=prod&prefix=locks-").unwrap();
    let StoreUrl::Kubernetes(k) = &url else {
        panic!("not k8s: {url:?}")
    };
    assert_eq!(k.namespace.as_deref(), Some("team-a"));
    assert_eq!(
        k.kubeconfig.as_deref(),
        Some(std::path::Path::new("/etc/kc"))
    );
    assert_eq!(k.context.as_deref(), Some("prod"));
    assert_eq!(k.prefix, "locks-");
    assert_eq!(url.scheme(), "k8s");
    assert_eq!(
        url.to_string(),
        "k8s://team-a?kubeconfig=/etc/kc&context=prod&prefix=locks-"
    );
    let plain = StoreUrl::parse("kubernetes://").unwrap();
    let StoreUrl::Kubernetes(k) = &plain else {
        panic!("not k8s: {plain:?}")
    };
    assert_eq!(k.namespace, None);
    assert_eq!(k.prefix, "lockward-");
    assert_eq!(plain.to_string(), "k8s://");
    assert_eq!(
        StoreUrl::parse("k8s://?prefix=").unwrap().to_string(),
        "k8s://?prefix="
    );
    for bad in [
        "k8s://Team",
        "k8s://a/b",
        "k8s://u:p@ns",
        "k8s://ns?prefix=-x",
        "k8s://ns?ttl=1",
    ] {
        let err = StoreUrl::parse(bad).unwrap_err().to_string();
        assert!(!err.contains(":p@"), "{err}");
        assert!(
            matches!(
                StoreUrl::parse(bad),
                Err(Error::InvalidArgument { what: "url", .. })
            ),
            "{bad}"
        );
    }
}
