// Package encrypt keeps chosen resources encrypted at rest. Its Store wraps
// any store.Store (Badger, etcd) and passes the documents of the resources a
// Kubernetes EncryptionConfiguration (apiserver.config.k8s.io/v1) lists
// through Kubernetes' own value transformers (k8s.io/apiserver's aescbc,
// aesgcm, secretbox and identity) on their way to the backend and back, as
// kube-apiserver does at its etcd boundary: the first provider of a resource
// writes, every provider reads, and a stored value begins with the
// provider's prefix and key name (k8s:enc:aescbc:v1:KEYNAME:).
//
// Everything above the wrapper (the engine's decoding, its byte scans of
// stored metadata, lists, watches, the garbage collector) sees plaintext;
// the backend, its files and its snapshots see ciphertext. Keys outside the
// listed resources, and the server's private records, pass through untouched
// and at no cost.
//
// The package imports the store contract and Kubernetes' libraries, nothing
// else of Setpoint's. The key material of the configuration never appears in
// its errors or logs.
package encrypt
