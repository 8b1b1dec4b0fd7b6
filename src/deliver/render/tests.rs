//! Unit tests of `render`.

use super::*;
use drift_model::{Drift, DriftState, Evidence, OwnerChain, Severity};

pub(crate) fn notice() -> Notice {
    Notice {
        kind: NoticeKind::Firing,
        drift: Drift {
            id: "d1".into(),
            class: "traffic_drift".into(),
            rule: None,
            severity: Severity::Critical,
            state: DriftState::Firing,
            cluster: "prod".into(),
            uid: "u".into(),
            api_version: "serving.knative.dev/v1".into(),
            kind: "Service".into(),
            namespace: "pay".into(),
            name: "checkout".into(),
            labels: Default::default(),
            owner: OwnerChain {
                service: Some("checkout".into()),
                ..Default::default()
            },
            evidence: Evidence {
                summary: "split moved".into(),
                hint: Some("kn service update checkout".into()),
                ..Default::default()
            },
            since: 0,
            fire_at: 0,
            fired_at: Some(0),
            resolved_at: None,
            resolution: None,
        },
        at: 0,
        resend: 0,
        remediation: None,
    }
}

#[test]
fn builtin_titles_in_both_languages() {
    let mut style = Style::english();
    assert_eq!(
        style.title(&notice()),
        "[FIRING] traffic_drift on Service pay/checkout (prod)"
    );
    style.language = Language::Zh;
    style.classes = drift_core::classify::classes::catalog();
    assert_eq!(
        style.title(&notice()),
        "【告警】流量漂移（traffic_drift） Service pay/checkout（prod）"
    );
}

#[test]
fn values_stay_on_one_line_in_every_markup() {
    for markup in [Markup::Plain, Markup::Markdown, Markup::Slack] {
        for value in ["a\nb", "a\r\nb", "a\rb", "a\u{2028}b", "a\u{85}b"] {
            assert_eq!(
                visible(&markup.text(value)),
                "a\\nb",
                "{markup:?} {value:?}"
            );
            assert_eq!(
                visible(&markup.code(value)),
                "a\\nb",
                "{markup:?} {value:?}"
            );
        }
    }
}

/// What a reader sees.
fn visible(text: &str) -> String {
    text.replace(ZERO_WIDTH_SPACE, "")
}

#[test]
fn markdown_values_open_no_construct() {
    let cases = [
        // (value, what the construct must not be)
        ("[Click](https://evil.example)", "]("),
        ("![p](https://evil.example/p.png)", "]("),
        ("[a][ref]", "]["),
        ("<at user_id=\"all\">所有人</at>", "<at"),
        ("</at>", "</"),
        ("<@U123>", "<@"),
        ("<https://evil.example>", "<h"),
        ("<!channel>", "<!"),
        ("<font color=\"warning\">", "<f"),
        ("x @all y", "@all"),
        ("@所有人", "@所有人"),
        ("cc @HERE", "@HERE"),
        ("a```b", "```"),
        ("a~~~~b", "~~~"),
        ("&#60;at id=all&#62;", "&#"),
        ("&lt;@U123&gt;", "&lt"),
    ];
    for (value, construct) in cases {
        let text = Markup::Markdown.text(value);
        assert!(!text.contains(construct), "{value:?} → {text:?}");
        assert_eq!(visible(&text), value, "the value is shown as it is");
    }
    // A value that would start a block starts with an invisible character instead.
    for value in [
        "# h",
        "> q",
        "- l",
        "-",
        "* l",
        "+ l",
        "1. o",
        "12) o",
        "[r]: https://evil.example",
        "```",
        "| t |",
        "===",
        "***",
        "<p>",
    ] {
        assert!(
            Markup::Markdown.text(value).starts_with(ZERO_WIDTH_SPACE),
            "{value:?}"
        );
    }
    // Ordinary values are left alone: digests, addresses, arithmetic, numbers.
    for value in [
        "gcr.io/app@sha256:0a1b",
        "jane@example.com",
        "mail @alloy",
        "1 < 2",
        "-1",
        "100",
        "a_b*c",
    ] {
        assert_eq!(Markup::Markdown.text(value), value);
    }
}

#[test]
fn slack_escapes_control_characters_once() {
    assert_eq!(
        Markup::Slack.text("a < b && c > d <@U123> <!here>"),
        "a &lt; b &amp;&amp; c &gt; d &lt;@U123&gt; &lt;!here&gt;"
    );
    assert_eq!(
        visible(&Markup::Slack.text("@channel ```x```")),
        "@channel ```x```"
    );
    assert!(!Markup::Slack.text("@channel ```x```").contains("@channel"));
    assert!(!Markup::Slack.code("a```b").contains("```"));
}

#[test]
fn templates_write_values_for_their_markup_and_fill_once() {
    let mut style = Style::english();
    style.templates = TemplateConfig {
        title: Some("{{state}} {{cluster}}".into()),
        body: Some("{{summary}}".into()),
    };
    let mut hostile = notice();
    hostile.drift.cluster = "prod\n# x".into();
    hostile.drift.evidence.summary = "# Owned\n[x](https://evil.example) {{hint}}".into();
    assert_eq!(style.title(&hostile), "FIRING prod\\n# x");
    let message = Message {
        id: "m".into(),
        notices: vec![hostile],
        now: 0,
        omitted: 0,
    };
    let body = style.markdown(&message, true);
    assert_eq!(
        visible(&body),
        "# Owned\\n[x](https://evil.example) {{hint}}\n",
        "a value's `{{hint}}` is not filled"
    );
    assert!(
        body.starts_with(ZERO_WIDTH_SPACE) && !body.contains("]("),
        "{body:?}"
    );
}

#[test]
fn template_overrides_fill_variables() {
    let mut style = Style::english();
    style.templates = TemplateConfig {
        title: Some("{{state}}: {{className}} {{namespace}}/{{name}} [{{severity}}]".into()),
        body: Some("{{summary}} -> {{hint}} ({{service}}, {{cluster}})".into()),
    };
    assert_eq!(
        style.title(&notice()),
        "FIRING: traffic_drift pay/checkout [critical]"
    );
    let message = Message {
        id: "m".into(),
        notices: vec![notice()],
        now: 0,
        omitted: 0,
    };
    assert_eq!(
        style.markdown(&message, true),
        "split moved -> kn service update checkout (checkout, prod)\n"
    );
}

#[test]
fn a_remediation_notice_says_what_was_done_in_both_languages_and_digests_count_it_apart() {
    use drift_model::remediation::{Attempt, Outcome};
    let attempt = Attempt {
        drift_id: "d1".into(),
        cluster: "prod".into(),
        object: "serving.knative.dev/v1/Service/pay/checkout".into(),
        fields: vec!["/spec/traffic".into()],
        at: 0,
        mode: "apply".into(),
        action: "revert".into(),
        rule: "revert-hand-edits".into(),
        approved_by: Some("alice".into()),
        request: None,
        resource_version: None,
        judged: None,
        outcome: Outcome::Applied,
        status: Some(200),
        resource_version_after: None,
        reason: None,
        detail: None,
    };
    let told = Notice {
        kind: NoticeKind::Remediation,
        remediation: Some(Box::new(attempt)),
        ..notice()
    };
    let mut style = Style::english();
    assert_eq!(
        style.title(&told),
        "[REMEDIATION] traffic_drift on Service pay/checkout (prod)"
    );
    let fields = style.fields(&told, Markup::Plain);
    assert!(
        fields.contains(&(
            "Remediation",
            "revert: applied by drift-sentinel (rule revert-hand-edits), approved by alice"
                .to_string()
        )),
        "{fields:?}"
    );
    let message = Message {
        id: "m".into(),
        notices: vec![notice(), told.clone()],
        now: 0,
        omitted: 0,
    };
    assert_eq!(
        style.message_title(&message),
        "[DIGEST] 2 notices (1 firing, 0 resolved, 1 remediations)"
    );
    style.language = Language::Zh;
    style.classes = drift_core::classify::classes::catalog();
    assert!(style.title(&told).starts_with("【自动修复】"));
    let fields = style.fields(&told, Markup::Plain);
    assert!(
        fields.contains(&(
            "修复",
            "回滚字段：已由 drift-sentinel 执行（规则 revert-hand-edits），批准人 alice"
                .to_string()
        )),
        "{fields:?}"
    );
}
