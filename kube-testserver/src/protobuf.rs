//! Just enough of Kubernetes' protobuf encoding to read the CertificateSigningRequest that
//! client-go's typed clients (`kubectl certificate approve|deny`) PUT to `/approval` and
//! `/status`: those writes keep everything but `status` (and the name and resourceVersion
//! they are checked against), so only those fields are read; the rest is skipped.
//!
//! The body is the `k8s\0` magic, then a `runtime.Unknown` whose `raw` (field 2) is the
//! object. Field numbers are those of k8s.io/api/certificates/v1/generated.proto and
//! apimachinery's meta/v1 ObjectMeta and Time.

use serde_json::{Map, Value, json};

use super::error::{ApiError, ApiResult};

const MAGIC: &[u8] = b"k8s\x00";

/// One field of a message: its number and its payload (varint or bytes).
enum Field<'a> {
    Varint(u32, u64),
    Bytes(u32, &'a [u8]),
}

fn invalid() -> ApiError {
    ApiError::bad_request("the protobuf body could not be decoded")
}

fn varint(buf: &mut &[u8]) -> ApiResult<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first().ok_or_else(invalid)?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(invalid())
}

/// The fields of one message, in order.
fn fields(mut buf: &[u8]) -> ApiResult<Vec<Field<'_>>> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = u32::try_from(key >> 3).map_err(|_| invalid())?;
        match key & 7 {
            0 => out.push(Field::Varint(number, varint(&mut buf)?)),
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                buf = buf.get(n..).ok_or_else(invalid)?;
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|_| invalid())?;
                let bytes = buf.get(..len).ok_or_else(invalid)?;
                buf = &buf[len..];
                out.push(Field::Bytes(number, bytes));
            }
            _ => return Err(invalid()),
        }
    }
    Ok(out)
}

fn bytes_of(buf: &[u8], number: u32) -> ApiResult<Vec<&[u8]>> {
    Ok(fields(buf)?
        .into_iter()
        .filter_map(|f| match f {
            Field::Bytes(n, b) if n == number => Some(b),
            _ => None,
        })
        .collect())
}

fn first(buf: &[u8], number: u32) -> ApiResult<Option<&[u8]>> {
    Ok(bytes_of(buf, number)?.into_iter().next())
}

fn text(buf: &[u8], number: u32) -> ApiResult<Option<String>> {
    first(buf, number)?
        .map(|b| String::from_utf8(b.to_vec()).map_err(|_| invalid()))
        .transpose()
}

/// A meta/v1 Time (seconds = 1) as RFC 3339; None for Go's zero time, which JSON would carry
/// as null (and the registry then fills in).
fn time(buf: &[u8]) -> ApiResult<Option<Value>> {
    let seconds = fields(buf)?
        .into_iter()
        .find_map(|f| match f {
            Field::Varint(1, v) => Some(v as i64),
            _ => None,
        })
        .unwrap_or(0);
    if seconds <= 0 {
        return Ok(None);
    }
    let ts = k8s_openapi::jiff::Timestamp::from_second(seconds).map_err(|_| invalid())?;
    Ok(Some(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().into()))
}

fn condition(buf: &[u8]) -> ApiResult<Value> {
    let mut c = Map::new();
    for (key, number) in [("type", 1), ("reason", 2), ("message", 3), ("status", 6)] {
        if let Some(v) = text(buf, number)? {
            c.insert(key.into(), v.into());
        }
    }
    for (key, number) in [("lastUpdateTime", 4), ("lastTransitionTime", 5)] {
        if let Some(t) = first(buf, number)?.map(time).transpose()?.flatten() {
            c.insert(key.into(), t);
        }
    }
    Ok(Value::Object(c))
}

fn status(buf: &[u8]) -> ApiResult<Value> {
    use base64::Engine as _;
    let conditions: Vec<Value> = bytes_of(buf, 1)?
        .into_iter()
        .map(condition)
        .collect::<ApiResult<_>>()?;
    let mut status = json!({});
    if !conditions.is_empty() {
        status["conditions"] = conditions.into();
    }
    if let Some(cert) = first(buf, 2)? {
        status["certificate"] = base64::engine::general_purpose::STANDARD.encode(cert).into();
    }
    Ok(status)
}

/// The CertificateSigningRequest in a protobuf body, as JSON: `metadata.name`,
/// `metadata.resourceVersion` and `status`.
pub fn csr_to_json(body: &[u8]) -> ApiResult<Value> {
    let unknown = body.strip_prefix(MAGIC).ok_or_else(invalid)?;
    let raw = first(unknown, 2)?.ok_or_else(invalid)?;
    let mut obj = json!({ "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest" });
    let mut meta = Map::new();
    if let Some(m) = first(raw, 1)? {
        for (key, number) in [("name", 1), ("resourceVersion", 6)] {
            if let Some(v) = text(m, number)?.filter(|v| !v.is_empty()) {
                meta.insert(key.into(), v.into());
            }
        }
    }
    obj["metadata"] = Value::Object(meta);
    if let Some(s) = first(raw, 3)? {
        obj["status"] = status(s)?;
    }
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_field(number: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from(number << 3 | 2).unwrap()];
        out.push(u8::try_from(payload.len()).unwrap());
        out.extend_from_slice(payload);
        out
    }

    fn time_of(seconds: u8) -> Vec<u8> {
        if seconds == 0 {
            vec![]
        } else {
            vec![1 << 3, seconds]
        }
    }

    #[test]
    fn reads_name_resource_version_and_status() {
        let meta = [
            bytes_field(1, b"t1"),
            bytes_field(5, b"uid"),
            bytes_field(6, b"7"),
        ]
        .concat();
        let condition = [
            bytes_field(1, b"Approved"),
            bytes_field(2, b"KubectlApprove"),
            bytes_field(4, &time_of(100)),
            bytes_field(5, &time_of(0)),
            bytes_field(6, b"True"),
        ]
        .concat();
        let status = [bytes_field(1, &condition), bytes_field(2, b"PEM")].concat();
        let spec = bytes_field(7, b"example.com/x");
        let raw = [
            bytes_field(1, &meta),
            bytes_field(2, &spec),
            bytes_field(3, &status),
        ]
        .concat();
        let typemeta = bytes_field(1, b"certificates.k8s.io/v1");
        let body = [MAGIC.to_vec(), bytes_field(1, &typemeta), bytes_field(2, &raw)].concat();
        assert_eq!(
            csr_to_json(&body).unwrap(),
            json!({
                "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": { "name": "t1", "resourceVersion": "7" },
                "status": {
                    "conditions": [{ "type": "Approved", "reason": "KubectlApprove", "status": "True",
                                     "lastUpdateTime": "1970-01-01T00:01:40Z" }],
                    "certificate": "UEVN",
                },
            })
        );
        assert!(csr_to_json(b"not k8s").is_err());
        assert!(csr_to_json(&[MAGIC, &[0x12, 0x05, 0x0a]].concat()).is_err());
    }
}
