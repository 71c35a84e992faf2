use super::snippet;

#[test]
fn snippet_table() {
    let long_page = format!(
        "<html><head><title>404</title></head><body><h1>404 from the proxy</h1>{}</body></html>",
        "p".repeat(200)
    );
    let cases: Vec<(&str, Vec<u8>, String)> = vec![
        (
            "nginx error page: its words, not its markup",
            b"<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n".to_vec(),
            "503 Service Temporarily Unavailable 503 Service Temporarily Unavailable nginx".into(),
        ),
        (
            "doctype, any case",
            b"  <!DOCTYPE HTML><html><body><p>It works</p></body></html>".to_vec(),
            "It works".into(),
        ),
        (
            "a long page stops at 120 characters",
            long_page.into_bytes(),
            format!("404 404 from the proxy {}", "p".repeat(97)),
        ),
        (
            "plain text as it is",
            b"internal server error\n".to_vec(),
            "internal server error".into(),
        ),
        (
            "JSON that is not CFSSL's keeps its braces",
            br#"{"message": "<b>no</b>"}"#.to_vec(),
            r#"{"message": "<b>no</b>"}"#.into(),
        ),
        (
            "control characters and runs of spaces become one space",
            b"a\x00\x07b   \t c".to_vec(),
            "a b c".into(),
        ),
        ("not UTF-8", vec![0xff, b'o', b'k'], "\u{fffd}ok".into()),
        ("empty", Vec::new(), String::new()),
    ];
    for (name, body, want) in cases {
        assert_eq!(snippet(&body), want, "{name}");
    }
}
