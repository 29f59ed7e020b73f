#!/bin/sh
# Stands in for Prisma's native schema engine where its download failed (no network to
# binaries.prisma.sh). `prisma generate` only asks it for `--version`; everything that really
# needs the engine (`prisma migrate`, `db push`, `migrate diff`) fails here with this message.
# scripts/prisma-engine.mjs points PRISMA_SCHEMA_ENGINE_BINARY here only when the real engine
# is absent, so an install that has it keeps using it.
if [ "$1" = "--version" ]; then
  echo "schema-engine-cli 0.0.0-offline-stub"
  exit 0
fi
echo "schema-engine stub: Prisma's schema engine is not installed (it could not be downloaded); use 'npm run db:migrate' to apply migrations" >&2
exit 1
