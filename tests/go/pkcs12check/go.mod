module cfssl-issuer.local/pkcs12check

go 1.25

require software.sslmate.com/src/go-pkcs12 v0.7.3
