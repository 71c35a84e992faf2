//! Rows for the CA's answers and the CertificateRequest.
