//! What aws-lc-rs's high-level API does not offer, done with the same provider's C API
//! (aws-lc-sys), as Go's crypto packages (and so cert-manager) do it:
//!
//! - RSA keys of any size AWS-LC generates (multiples of 128 bits; aws-lc-rs offers 2048, 3072,
//!   4096 and 8192 only);
//! - ECDSA signatures over a digest that is not the curve's own (P-256 with SHA-384, P-384 with
//!   SHA-512, ...): the digest is truncated to the group order's length (SEC 1, 4.1.3), as Go's
//!   `ecdsa.SignASN1` does, and the signature is DER.
//!
//! Every pointer from the C API is owned by one guard that frees it.

use std::os::raw::{c_int, c_uint};

use aws_lc_sys as sys;

/// Frees what the C API allocated when dropped.
struct Owned<T> {
    ptr: *mut T,
    free: unsafe extern "C" fn(*mut T),
}

impl<T> Owned<T> {
    /// `None` for a null pointer (the C API's failure).
    fn new(ptr: *mut T, free: unsafe extern "C" fn(*mut T)) -> Option<Self> {
        (!ptr.is_null()).then_some(Self { ptr, free })
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` is non-null, was returned by the C API with `free` as its destructor,
        // and is freed only here.
        unsafe { (self.free)(self.ptr) }
    }
}

/// A new RSA key of `bits` (public exponent 65537) as PKCS#1 `RSAPrivateKey` DER; `None` when
/// AWS-LC refuses. The caller checks the modulus is `bits` long (AWS-LC rounds sizes down to
/// a multiple of 128).
pub(super) fn rsa_pkcs1(bits: u32) -> Option<Vec<u8>> {
    let bits = c_int::try_from(bits).ok()?;
    // SAFETY: each pointer is checked for null before use and owned by a guard; the output
    // buffer is copied out before it is freed with OPENSSL_free, as AWS-LC documents.
    unsafe {
        let exponent = Owned::new(sys::BN_new(), sys::BN_free)?;
        if sys::BN_set_word(exponent.ptr, 65_537) != 1 {
            return None;
        }
        let rsa = Owned::new(sys::RSA_new(), sys::RSA_free)?;
        if sys::RSA_generate_key_ex(rsa.ptr, bits, exponent.ptr, std::ptr::null_mut()) != 1 {
            return None;
        }
        let mut out: *mut u8 = std::ptr::null_mut();
        let mut len = 0usize;
        if sys::RSA_private_key_to_bytes(&raw mut out, &raw mut len, rsa.ptr) != 1 || out.is_null() {
            return None;
        }
        let der = std::slice::from_raw_parts(out, len).to_vec();
        sys::OPENSSL_free(out.cast());
        Some(der)
    }
}

/// The DER ECDSA signature of `digest` (any length: truncated to the order's) by the EC key in
/// `pkcs8`; `None` when the key does not parse or signing fails.
pub(super) fn ecdsa_sign_digest(pkcs8: &[u8], digest: &[u8]) -> Option<Vec<u8>> {
    // SAFETY: the CBS reads `pkcs8`, which outlives it; each pointer is checked for null and
    // owned by a guard; `signature` has room for ECDSA_size bytes, the most ECDSA_sign writes.
    unsafe {
        let mut cbs = std::mem::MaybeUninit::<sys::CBS>::uninit();
        sys::CBS_init(cbs.as_mut_ptr(), pkcs8.as_ptr(), pkcs8.len());
        let pkey = Owned::new(sys::EVP_parse_private_key(cbs.as_mut_ptr()), sys::EVP_PKEY_free)?;
        let ec = Owned::new(sys::EVP_PKEY_get1_EC_KEY(pkey.ptr), sys::EC_KEY_free)?;
        let mut signature = vec![0u8; sys::ECDSA_size(ec.ptr)];
        let mut len: c_uint = 0;
        let signed = sys::ECDSA_sign(
            0,
            digest.as_ptr(),
            digest.len(),
            signature.as_mut_ptr(),
            &raw mut len,
            ec.ptr,
        );
        if signed != 1 {
            return None;
        }
        signature.truncate(usize::try_from(len).ok()?);
        Some(signature)
    }
}
