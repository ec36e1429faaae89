#!/usr/bin/env bash
# Make TLS certificates for a dimbsvm Dask cluster: a private CA, and a
# certificate + key for the scheduler, the workers and the client, each signed
# by that CA (Dask uses mutual TLS: every side proves itself to the others).
#
# usage: deploy/tls/make-certs.sh [-o DIR] [-d DAYS] [HOST_OR_IP ...]
#
#   -o DIR   where to write the files (default: ./certs)
#   -d DAYS  validity of the scheduler/worker/client certificates (default: 365)
#   HOST_OR_IP  names and addresses of the scheduler and worker hosts, put in
#            the certificates' subjectAltName (default: 127.0.0.1 localhost)
#
# Writes ca.pem ca.key scheduler.pem scheduler.key worker.pem worker.key
# client.pem client.key. Keys are mode 0600. A CA already in DIR is reused, so
# running it again (e.g. with more hosts) re-issues the certificates without
# invalidating the CA that every host trusts. Keep ca.key off the cluster.
set -euo pipefail

out=certs
days=365
while getopts "o:d:h" opt; do
  case $opt in
    o) out=$OPTARG ;;
    d) days=$OPTARG ;;
    h) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "usage: $0 [-o DIR] [-d DAYS] [HOST_OR_IP ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- 127.0.0.1 localhost
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is not installed" >&2; exit 1; }

san=""
for host in "$@"; do
  if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then kind=IP; else kind=DNS; fi
  san+="${san:+,}$kind:$host"
done

umask 077
mkdir -p "$out"
cd "$out"

newkey() {  # EC P-256 key, readable by its owner only
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
  chmod 600 "$1"
}

if [ -f ca.key ] && [ -f ca.pem ]; then
  echo "reusing the CA in $out/ca.pem"
else
  newkey ca.key
  cat > ca.cnf <<CNF
[req]
distinguished_name = dn
prompt = no
x509_extensions = ext
[dn]
CN = dimbsvm-dask-ca
[ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
CNF
  openssl req -x509 -new -config ca.cnf -key ca.key -sha256 -days $((days * 10)) -out ca.pem
  rm -f ca.cnf ca.srl
fi

for role in scheduler worker client; do
  usage=serverAuth,clientAuth   # scheduler and workers both listen and connect
  [ "$role" = client ] && usage=clientAuth
  newkey "$role.key"
  cat > "$role.cnf" <<CNF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = dimbsvm-dask-$role
[ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = $usage
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
CNF
  openssl req -new -config "$role.cnf" -key "$role.key" -out "$role.csr"
  openssl x509 -req -in "$role.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -sha256 -days "$days" \
    -extfile "$role.cnf" -extensions ext -out "$role.pem" 2>/dev/null
  openssl verify -CAfile ca.pem "$role.pem" >/dev/null
  rm -f "$role.cnf" "$role.csr"
done
rm -f ca.srl
chmod 644 ./*.pem

echo "wrote $(pwd): ca.pem (+ ca.key, keep it safe), {scheduler,worker,client}.{pem,key}"
echo "subjectAltName: $san; valid for $days days"
