import type { CodegenConfig } from '@graphql-codegen/cli';

// Typed documents for every operation the app writes with graphql(), generated from the
// server's schema. `make verify` fails when src/gql is stale.
const config: CodegenConfig = {
  schema: '../graph/schema/*.graphqls',
  documents: ['src/**/*.{ts,tsx}', '!src/gql/**'],
  ignoreNoDocuments: true,
  generates: {
    'src/gql/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { Time: 'string', JSON: 'unknown', Int64: 'number' },
      },
    },
  },
};
export default config;
