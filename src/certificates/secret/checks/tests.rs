//! One table per post-issuance check, each row a change to a freshly issued Secret (built by
//! `secret_body`, with the managedFields an apply of it records) and the exact violation.

use k8s_openapi::ByteString;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::json;

use super::*;
use crate::api::certmanager::{
    AdditionalOutputFormat, CertificateSpec, JksKeystore, Keystores, Pkcs12Keystore, SecretTemplate,
};
use crate::certificates::policy::evaluate;
use crate::certificates::secret::tests::{Leaf, certificate, leaf};
use crate::certificates::secret::{BodyOptions, KeystoreData, SecretData, secret_body};

const MANAGER: &str = "cert-manager-certificates-issuing";

struct Fixture {
    crt: Certificate,
    secret: Secret,
    owner_ref: bool,
}

/// The `fieldsV1` an apply of `body` records: every label, annotation, data key and owner
/// reference it sets.
fn applied_fields(body: &Secret) -> Value {
    let fields = |keys: Vec<&String>| -> Value {
        Value::Object(keys.into_iter().map(|k| (format!("f:{k}"), json!({}))).collect())
    };
    let meta = &body.metadata;
    let mut metadata = json!({
        "f:labels": fields(meta.labels.iter().flat_map(|m| m.keys()).collect()),
        "f:annotations": fields(meta.annotations.iter().flat_map(|m| m.keys()).collect()),
    });
    for reference in meta.owner_references.iter().flatten() {
        metadata["f:ownerReferences"][format!("k:{{\"uid\":\"{}\"}}", reference.uid)] = json!({
            ".": {}, "f:apiVersion": {}, "f:blockOwnerDeletion": {}, "f:controller": {},
            "f:kind": {}, "f:name": {}, "f:uid": {},
        });
    }
    json!({
        "f:metadata": metadata,
        "f:data": fields(body.data.iter().flat_map(|m| m.keys()).collect()),
        "f:type": {},
    })
}

fn set_managed(secret: &mut Secret, fields: Value) {
    secret.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(MANAGER.into()),
        operation: Some("Apply".into()),
        api_version: Some("v1".into()),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(FieldsV1(fields)),
        ..ManagedFieldsEntry::default()
    }]);
}

fn managed(secret: &Secret) -> Value {
    secret.metadata.managed_fields.as_ref().unwrap()[0]
        .fields_v1
        .as_ref()
        .unwrap()
        .0
        .clone()
}

fn edit_managed(secret: &mut Secret, edit: impl FnOnce(&mut Value)) {
    let mut fields = managed(secret);
    edit(&mut fields);
    set_managed(secret, fields);
}

fn formats(types: &[&str]) -> Vec<AdditionalOutputFormat> {
    types
        .iter()
        .map(|t| AdditionalOutputFormat {
            type_: t.to_string(),
            ..AdditionalOutputFormat::default()
        })
        .collect()
}

/// A Certificate with a template, both output formats and a PKCS#12 keystore, issued with the
/// owner reference on: the Secret it gets passes every check.
fn fixture() -> Fixture {
    let (crt_pem, key_pem) = leaf(&Leaf {
        cn: "web.example.com",
        dns: vec!["web.example.com"],
        ..Leaf::default()
    });
    let crt = certificate(CertificateSpec {
        secret_name: "web-tls".into(),
        secret_template: Some(Box::new(SecretTemplate {
            labels: [("team".to_string(), "web".to_string())].into(),
            annotations: [("note".to_string(), "kept".to_string())].into(),
            ..SecretTemplate::default()
        })),
        additional_output_formats: formats(&["CombinedPEM", "DER"]),
        keystores: Some(Box::new(Keystores {
            pkcs12: Some(Pkcs12Keystore {
                create: true,
                password: Some("changeit".into()),
                ..Pkcs12Keystore::default()
            }),
            ..Keystores::default()
        })),
        ..CertificateSpec::default()
    });
    let stores = KeystoreData {
        pkcs12: Some(crate::certificates::secret::Store {
            keystore: b"p12".to_vec(),
            truststore: Some(b"trust".to_vec()),
        }),
        jks: None,
    };
    let input = SecretData {
        private_key: key_pem.as_bytes(),
        certificate: crt_pem.as_bytes(),
        ca: crt_pem.as_bytes(),
        certificate_name: "web",
        issuer_name: "cfssl",
        issuer_kind: "ClusterIssuer",
        issuer_group: "cfssl-issuer.wikimedia.org",
    };
    let options = BodyOptions {
        existing_type: None,
        owner_reference: true,
    };
    let mut secret = secret_body(&crt, &input, &stores, options).unwrap();
    let fields = applied_fields(&secret);
    set_managed(&mut secret, fields);
    Fixture {
        crt,
        secret,
        owner_ref: true,
    }
}

type Row = (
    &'static str,
    fn(&mut Fixture),
    Option<(&'static str, &'static str)>,
);

/// A check as a closure over any input lifetime, with its name.
macro_rules! check {
    ($check:ident) => {
        |input: &Input<'_>| (Input::$check.name, (Input::$check.run)(input))
    };
}

fn run(check: impl Fn(&Input<'_>) -> (&'static str, Option<Violation>), rows: &[Row]) {
    for (name, edit, expected) in rows {
        let mut f = fixture();
        edit(&mut f);
        let input = Input {
            certificate: &f.crt,
            secret: &f.secret,
            field_manager: MANAGER,
            owner_ref_enabled: f.owner_ref,
        };
        let (check_name, got) = check(&input);
        let expected = expected.map(|(reason, message)| Violation::new(reason, message));
        assert_eq!(got, expected, "{check_name}: {name}");
    }
}

fn labels(f: &mut Fixture) -> &mut BTreeMap<String, String> {
    f.secret.metadata.labels.get_or_insert_with(BTreeMap::new)
}

fn annotations(f: &mut Fixture) -> &mut BTreeMap<String, String> {
    f.secret.metadata.annotations.get_or_insert_with(BTreeMap::new)
}

fn data(f: &mut Fixture) -> &mut BTreeMap<String, ByteString> {
    f.secret.data.get_or_insert_with(BTreeMap::new)
}

fn template(f: &mut Fixture) -> &mut SecretTemplate {
    f.crt.spec.secret_template.get_or_insert_with(Box::default)
}

#[test]
fn the_issued_secret_passes_the_whole_chain_in_order() {
    let f = fixture();
    let input = Input {
        certificate: &f.crt,
        secret: &f.secret,
        field_manager: MANAGER,
        owner_ref_enabled: true,
    };
    assert_eq!(evaluate(Input::POST_ISSUANCE, &input), None);
    let names: Vec<&str> = Input::POST_ISSUANCE.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "SecretBaseLabelsMismatch",
            "SecretCertificateDetailsAnnotationsMismatch",
            "SecretManagedLabelsAndAnnotationsManagedFieldsMismatch",
            "SecretSecretTemplateMismatch",
            "SecretSecretTemplateManagedFieldsMismatch",
            "SecretAdditionalOutputFormatsMismatch",
            "SecretAdditionalOutputFormatsManagedFieldsMismatch",
            "SecretOwnerReferenceMismatch",
            "SecretOwnerReferenceManagedFieldMismatch",
            "SecretKeystoreFormatMismatch",
        ]
    );
    // The first violation wins: a wrong base label and a missing output format.
    let mut f = fixture();
    labels(&mut f).insert("controller.cert-manager.io/fao".into(), "no".into());
    data(&mut f).remove("key.der");
    let input = Input {
        certificate: &f.crt,
        secret: &f.secret,
        field_manager: MANAGER,
        owner_ref_enabled: true,
    };
    let (name, violation) = evaluate(Input::POST_ISSUANCE, &input).unwrap();
    assert_eq!(name, "SecretBaseLabelsMismatch");
    assert_eq!(violation.reason, "SecretManagedMetadataMismatch");
}

#[test]
fn base_labels() {
    run(
        check!(BASE_LABELS),
        &[
            ("as issued", |_| {}, None),
            ("no labels at all", |f| f.secret.metadata.labels = None, None),
            (
                "label removed",
                |f| {
                    labels(f).remove("controller.cert-manager.io/fao");
                },
                None,
            ),
            (
                "label false",
                |f| {
                    labels(f).insert("controller.cert-manager.io/fao".into(), "false".into());
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "wrong base label controller.cert-manager.io/fao value \"false\", expected \"true\"",
                )),
            ),
            (
                "label empty",
                |f| {
                    labels(f).insert("controller.cert-manager.io/fao".into(), String::new());
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "wrong base label controller.cert-manager.io/fao value \"\", expected \"true\"",
                )),
            ),
        ],
    );
}

#[test]
fn certificate_details_annotations() {
    run(
        check!(CERTIFICATE_DETAILS_ANNOTATIONS),
        &[
            ("as issued", |_| {}, None),
            (
                "annotation removed (found by the managedFields check)",
                |f| {
                    annotations(f).remove("cert-manager.io/common-name");
                },
                None,
            ),
            (
                "no tls.crt",
                |f| {
                    data(f).remove("tls.crt");
                },
                None,
            ),
            (
                "common name changed",
                |f| {
                    annotations(f).insert("cert-manager.io/common-name".into(), "other".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret metadata other does not match certificate metadata web.example.com",
                )),
            ),
            (
                "alt-names and ip-sans changed: the first key in order is reported",
                |f| {
                    annotations(f).insert("cert-manager.io/ip-sans".into(), "10.0.0.1".into());
                    annotations(f).insert("cert-manager.io/alt-names".into(), "a.example.com".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret metadata a.example.com does not match certificate metadata web.example.com",
                )),
            ),
            (
                "tls.crt is not PEM",
                |f| {
                    data(f).insert("tls.crt".into(), ByteString(b"garbage".to_vec()));
                },
                Some((
                    "InvalidCertificate",
                    "Failed getting secret annotations: error decoding certificate PEM block: no valid certificates found",
                )),
            ),
        ],
    );
}

#[test]
fn managed_labels_and_annotations() {
    run(
        check!(MANAGED_LABELS_AND_ANNOTATIONS),
        &[
            ("as issued", |_| {}, None),
            (
                "no managed fields",
                |f| f.secret.metadata.managed_fields = None,
                Some((
                    "SecretManagedMetadataMismatch",
                    "Secret is missing these Managed Labels: [controller.cert-manager.io/fao]",
                )),
            ),
            (
                "another manager's fields do not count",
                |f| {
                    let entries = f.secret.metadata.managed_fields.as_mut().unwrap();
                    entries[0].manager = Some("kubectl".into());
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "Secret is missing these Managed Labels: [controller.cert-manager.io/fao]",
                )),
            ),
            (
                "extra cert-manager label",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:labels"]["f:cert-manager.io/extra"] = json!({});
                    });
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "Secret has these extra Labels: [cert-manager.io/extra]",
                )),
            ),
            (
                "missing details annotations",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        let a = m["f:metadata"]["f:annotations"].as_object_mut().unwrap();
                        a.remove("f:cert-manager.io/uri-sans");
                        a.remove("f:cert-manager.io/ip-sans");
                    });
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "Secret is missing these Managed Annotations: [cert-manager.io/ip-sans cert-manager.io/uri-sans]",
                )),
            ),
            (
                "extra details annotation the leaf does not give",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:annotations"]["f:cert-manager.io/email-sans"] = json!({});
                    });
                },
                Some((
                    "SecretManagedMetadataMismatch",
                    "Secret has these extra Annotations: [cert-manager.io/email-sans]",
                )),
            ),
            (
                "certificate and issuer names are not checked here",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        let a = m["f:metadata"]["f:annotations"].as_object_mut().unwrap();
                        a.remove("f:cert-manager.io/certificate-name");
                        a.remove("f:cert-manager.io/issuer-kind");
                    });
                },
                None,
            ),
            (
                "user labels and annotations are not checked here",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:labels"]["f:other"] = json!({});
                        m["f:metadata"]["f:annotations"]["f:example.com/x"] = json!({});
                    });
                },
                None,
            ),
            (
                "managed fields do not parse",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"] = json!(1);
                    });
                },
                Some((
                    "ManagedFieldsParseError",
                    "failed to decode managed fields on Secret: expected a JSON object or null for \"f:metadata\", found 1",
                )),
            ),
            (
                "tls.crt does not decode",
                |f| {
                    data(f).insert("tls.crt".into(), ByteString(b"garbage".to_vec()));
                },
                Some((
                    "InvalidCertificate",
                    "Failed getting secret annotations: error decoding certificate PEM block: no valid certificates found",
                )),
            ),
        ],
    );
}

#[test]
fn secret_template_values() {
    run(
        check!(SECRET_TEMPLATE),
        &[
            ("as issued", |_| {}, None),
            ("no template", |f| f.crt.spec.secret_template = None, None),
            (
                "template key absent from the Secret (found by the managedFields check)",
                |f| {
                    template(f).labels.insert("tier".into(), "front".into());
                },
                None,
            ),
            (
                "annotation value changed",
                |f| {
                    annotations(f).insert("note".into(), "edited".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Certificate's SecretTemplate Annotations missing or incorrect value on Secret",
                )),
            ),
            (
                "label value changed",
                |f| {
                    labels(f).insert("team".into(), "db".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Certificate's SecretTemplate Labels missing or incorrect value on Secret",
                )),
            ),
            (
                "template changed, both differ: annotations first",
                |f| {
                    template(f).labels.insert("team".into(), "db".into());
                    template(f).annotations.insert("note".into(), "new".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Certificate's SecretTemplate Annotations missing or incorrect value on Secret",
                )),
            ),
        ],
    );
}

#[test]
fn secret_template_managed_fields() {
    run(
        check!(SECRET_TEMPLATE_MANAGED_FIELDS),
        &[
            ("as issued", |_| {}, None),
            (
                "label added to the template",
                |f| {
                    template(f).labels.insert("tier".into(), "front".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret is missing these Template Labels: [tier]",
                )),
            ),
            (
                "label removed from the template",
                |f| {
                    template(f).labels.clear();
                },
                Some(("SecretTemplateMismatch", "Secret has these extra Labels: [team]")),
            ),
            (
                "template removed: labels first",
                |f| f.crt.spec.secret_template = None,
                Some(("SecretTemplateMismatch", "Secret has these extra Labels: [team]")),
            ),
            (
                "annotation added to the template",
                |f| {
                    template(f).annotations.insert("a".into(), "1".into());
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret is missing these Template Annotations: [a]",
                )),
            ),
            (
                "annotation removed from the template",
                |f| {
                    template(f).annotations.clear();
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret has these extra Annotations: [note]",
                )),
            ),
            // cert-manager drops its own prefixes from the managed keys but not from the
            // template's, so allow-direct-injection always reads as missing (upstream behaviour).
            (
                "allow-direct-injection in the template",
                |f| {
                    template(f)
                        .annotations
                        .insert("cert-manager.io/allow-direct-injection".into(), "true".into());
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:annotations"]["f:cert-manager.io/allow-direct-injection"] =
                            json!({});
                    });
                },
                Some((
                    "SecretTemplateMismatch",
                    "Secret is missing these Template Annotations: [cert-manager.io/allow-direct-injection]",
                )),
            ),
            (
                "managed fields do not parse",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:labels"] = json!("x");
                    });
                },
                Some((
                    "ManagedFieldsParseError",
                    "failed to decode managed fields on Secret: expected a JSON object or null for \"f:labels\", found \"x\"",
                )),
            ),
        ],
    );
}

const DATA_MISMATCH: Option<(&str, &str)> = Some((
    "AdditionalOutputFormatsMismatch",
    "Certificate's AdditionalOutputFormats doesn't match Secret Data",
));

#[test]
fn additional_output_formats() {
    run(
        check!(ADDITIONAL_OUTPUT_FORMATS),
        &[
            ("as issued", |_| {}, None),
            (
                "none asked, keys still there",
                |f| {
                    f.crt.spec.additional_output_formats.clear();
                },
                None,
            ),
            (
                "unknown format ignored",
                |f| {
                    f.crt.spec.additional_output_formats = formats(&["PKCS7"]);
                },
                None,
            ),
            (
                "combined PEM missing",
                |f| {
                    data(f).remove("tls-combined.pem");
                },
                DATA_MISMATCH,
            ),
            (
                "combined PEM stale",
                |f| {
                    data(f).insert("tls-combined.pem".into(), ByteString(b"old".to_vec()));
                },
                DATA_MISMATCH,
            ),
            (
                "DER missing",
                |f| {
                    data(f).remove("key.der");
                },
                DATA_MISMATCH,
            ),
            (
                "DER stale",
                |f| {
                    data(f).insert("key.der".into(), ByteString(vec![0x30, 0x00]));
                },
                DATA_MISMATCH,
            ),
            (
                "tls.key re-encoded: DER no longer matches",
                |f| {
                    let key = crate::pki::keys::Key::from_pem(&data(f)["tls.key"].0).unwrap();
                    let pkcs8 = key.to_pem(crate::pki::keys::Encoding::Pkcs8).unwrap();
                    data(f).insert("tls.key".into(), ByteString(pkcs8.into_bytes()));
                    f.crt.spec.additional_output_formats = formats(&["DER"]);
                },
                DATA_MISMATCH,
            ),
        ],
    );
}

const MANAGED_MISMATCH: Option<(&str, &str)> = Some((
    "AdditionalOutputFormatsMismatch",
    "Certificate's AdditionalOutputFormats doesn't match Secret ManagedFields",
));

#[test]
fn additional_output_formats_managed_fields() {
    run(
        check!(ADDITIONAL_OUTPUT_FORMATS_MANAGED_FIELDS),
        &[
            ("as issued", |_| {}, None),
            (
                "DER removed from the Certificate",
                |f| {
                    f.crt.spec.additional_output_formats = formats(&["CombinedPEM"]);
                },
                MANAGED_MISMATCH,
            ),
            (
                "all removed",
                |f| f.crt.spec.additional_output_formats.clear(),
                MANAGED_MISMATCH,
            ),
            (
                "all removed and no longer owned",
                |f| {
                    f.crt.spec.additional_output_formats.clear();
                    edit_managed(&mut f.secret, |m| {
                        let d = m["f:data"].as_object_mut().unwrap();
                        d.remove("f:key.der");
                        d.remove("f:tls-combined.pem");
                    });
                },
                None,
            ),
            (
                "asked but not owned (another manager wrote it)",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:data"].as_object_mut().unwrap().remove("f:key.der");
                    });
                },
                MANAGED_MISMATCH,
            ),
            (
                "managed fields do not parse",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:data"] = json!(true);
                    });
                },
                Some((
                    "ManagedFieldsParseError",
                    "failed to decode managed fields on Secret: expected a JSON object or null for \"f:data\", found true",
                )),
            ),
        ],
    );
}

#[test]
fn owner_reference() {
    const WRONG: Option<(&str, &str)> = Some((
        "SecretOwnerRefMismatch",
        "unexpected Secret Owner Reference value on Secret --enable-certificate-owner-ref=true",
    ));
    run(
        check!(OWNER_REFERENCE),
        &[
            ("as issued", |_| {}, None),
            (
                "disabled: not looked at",
                |f| {
                    f.owner_ref = false;
                    f.secret.metadata.owner_references = None;
                },
                None,
            ),
            ("missing", |f| f.secret.metadata.owner_references = None, WRONG),
            (
                "not the controller",
                |f| {
                    f.secret.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
                },
                WRONG,
            ),
            (
                "another Certificate's uid",
                |f| {
                    f.secret.metadata.owner_references.as_mut().unwrap()[0].uid = "other".into();
                },
                WRONG,
            ),
            (
                "another owner besides",
                |f| {
                    let refs = f.secret.metadata.owner_references.as_mut().unwrap();
                    let mut other = refs[0].clone();
                    other.uid = "other".into();
                    other.controller = None;
                    refs.insert(0, other);
                },
                None,
            ),
        ],
    );
}

#[test]
fn owner_reference_managed_field() {
    run(
        check!(OWNER_REFERENCE_MANAGED_FIELD),
        &[
            ("as issued", |_| {}, None),
            (
                "enabled, not owned",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]
                            .as_object_mut()
                            .unwrap()
                            .remove("f:ownerReferences");
                    });
                },
                Some((
                    "SecretOwnerRefMismatch",
                    "unexpected managed Secret Owner Reference field on Secret --enable-certificate-owner-ref=true",
                )),
            ),
            (
                "enabled, owned for another uid",
                |f| {
                    f.crt.metadata.uid = Some("new-uid".into());
                },
                Some((
                    "SecretOwnerRefMismatch",
                    "unexpected managed Secret Owner Reference field on Secret --enable-certificate-owner-ref=true",
                )),
            ),
            (
                "disabled, still owned",
                |f| f.owner_ref = false,
                Some((
                    "SecretOwnerRefMismatch",
                    "unexpected managed Secret Owner Reference field on Secret --enable-certificate-owner-ref=false",
                )),
            ),
            (
                "disabled, not owned",
                |f| {
                    f.owner_ref = false;
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]
                            .as_object_mut()
                            .unwrap()
                            .remove("f:ownerReferences");
                    });
                },
                None,
            ),
            (
                "managed fields do not parse",
                |f| {
                    edit_managed(&mut f.secret, |m| {
                        m["f:metadata"]["f:ownerReferences"] = json!({"k:[]": {}});
                    });
                },
                Some((
                    "ManagedFieldsParseError",
                    "failed to decode managed fields on Secret: parsing key as path element: \"k:[]\": a key must be a JSON object",
                )),
            ),
        ],
    );
}

fn set_keystores(f: &mut Fixture, pkcs12: Option<bool>, jks: Option<bool>) {
    f.crt.spec.keystores = Some(Box::new(Keystores {
        pkcs12: pkcs12.map(|create| Pkcs12Keystore {
            create,
            ..Pkcs12Keystore::default()
        }),
        jks: jks.map(|create| JksKeystore {
            create,
            ..JksKeystore::default()
        }),
        ..Keystores::default()
    }));
}

fn put(f: &mut Fixture, key: &str) {
    data(f).insert(key.into(), ByteString(b"store".to_vec()));
}

#[test]
fn keystore_format() {
    let mismatch = |message: &'static str| Some(("SecretMismatch", message));
    run(
        check!(KEYSTORE_FORMAT),
        &[
            ("as issued", |_| {}, None),
            (
                "no keystores, none stored",
                |f| {
                    f.crt.spec.keystores = None;
                    data(f).remove("keystore.p12");
                    data(f).remove("truststore.p12");
                },
                None,
            ),
            (
                "keystores removed from the Certificate",
                |f| f.crt.spec.keystores = None,
                mismatch("Keystore is not defined"),
            ),
            (
                "only a JKS truststore left",
                |f| {
                    f.crt.spec.keystores = None;
                    data(f).remove("keystore.p12");
                    data(f).remove("truststore.p12");
                    put(f, "truststore.jks");
                },
                mismatch("Keystore is not defined"),
            ),
            (
                "PKCS12 keystore missing",
                |f| {
                    data(f).remove("keystore.p12");
                },
                mismatch("PKCS12 Keystore key does not contain data"),
            ),
            (
                "PKCS12 truststore missing while the CA is known",
                |f| {
                    data(f).remove("truststore.p12");
                },
                mismatch("PKCS12 Keystore key does not contain data"),
            ),
            (
                "PKCS12 truststore missing, no CA",
                |f| {
                    data(f).remove("truststore.p12");
                    data(f).remove("ca.crt");
                },
                None,
            ),
            (
                "PKCS12 create turned off",
                |f| set_keystores(f, Some(false), None),
                mismatch("PKCS12 Keystore create disabled"),
            ),
            (
                "PKCS12 no longer defined",
                |f| set_keystores(f, None, Some(false)),
                mismatch("PKCS12 Keystore not defined"),
            ),
            (
                "JKS asked, not stored",
                |f| set_keystores(f, Some(true), Some(true)),
                mismatch("JKS Keystore key does not contain data"),
            ),
            (
                "JKS asked, keystore but no truststore with the CA known",
                |f| {
                    set_keystores(f, Some(true), Some(true));
                    put(f, "keystore.jks");
                },
                mismatch("JKS Keystore key does not contain data"),
            ),
            (
                "JKS asked and stored",
                |f| {
                    set_keystores(f, Some(true), Some(true));
                    put(f, "keystore.jks");
                    put(f, "truststore.jks");
                },
                None,
            ),
            (
                "JKS create off, still stored (JKS is checked first)",
                |f| {
                    set_keystores(f, Some(false), Some(false));
                    put(f, "keystore.jks");
                },
                mismatch("JKS Keystore create disabled"),
            ),
            (
                "JKS not defined, still stored",
                |f| {
                    set_keystores(f, Some(true), None);
                    put(f, "truststore.jks");
                },
                mismatch("JKS Keystore not defined"),
            ),
        ],
    );
}

#[test]
fn repair_decision_as_ensure_secret_data() {
    use crate::certificates::secret::{Repair, decide_repair};
    type Edit = fn(&mut Fixture);
    let rows: [(&str, Edit, &str); 5] = [
        ("as issued", |_| {}, "nothing"),
        (
            "no tls.key, broken label: left to the trigger chain",
            |f| {
                data(f).remove("tls.key");
                labels(f).insert("controller.cert-manager.io/fao".into(), "no".into());
            },
            "nothing",
        ),
        (
            "broken label",
            |f| {
                labels(f).insert("controller.cert-manager.io/fao".into(), "no".into());
            },
            "reapply SecretBaseLabelsMismatch",
        ),
        (
            "template changed",
            |f| {
                template(f).labels.insert("tier".into(), "front".into());
            },
            "reapply SecretSecretTemplateManagedFieldsMismatch",
        ),
        (
            "managed fields do not parse",
            |f| {
                edit_managed(&mut f.secret, |m| m["f:data"] = json!(1));
            },
            "unrepairable SecretManagedLabelsAndAnnotationsManagedFieldsMismatch",
        ),
    ];
    for (name, edit, expected) in rows {
        let mut f = fixture();
        edit(&mut f);
        let input = Input {
            certificate: &f.crt,
            secret: &f.secret,
            field_manager: MANAGER,
            owner_ref_enabled: true,
        };
        let got = match decide_repair(&input) {
            Repair::Nothing => "nothing".to_string(),
            Repair::Reapply { check, data, .. } => {
                // The re-apply writes the Secret's own material and recorded names.
                assert_eq!(
                    data.private_key,
                    &f.secret.data.as_ref().unwrap()["tls.key"].0[..]
                );
                assert_eq!(
                    data.certificate,
                    &f.secret.data.as_ref().unwrap()["tls.crt"].0[..]
                );
                assert_eq!(data.ca, &f.secret.data.as_ref().unwrap()["ca.crt"].0[..]);
                assert_eq!(
                    (
                        data.certificate_name,
                        data.issuer_name,
                        data.issuer_kind,
                        data.issuer_group
                    ),
                    ("web", "cfssl", "ClusterIssuer", "cfssl-issuer.wikimedia.org"),
                );
                format!("reapply {check}")
            }
            Repair::Unrepairable { check, violation } => {
                assert_eq!(violation.reason, "ManagedFieldsParseError");
                format!("unrepairable {check}")
            }
        };
        assert_eq!(got, expected, "{name}");
    }
}
