import { genTypesFlags } from '../scripts/generate.mjs';
import { LOADER_OPTIONS } from './index.js';

describe('the generator', () => {
  it('passes proto-loader-gen-types the options the runtime loads with', () => {
    expect(genTypesFlags(LOADER_OPTIONS)).toEqual([
      '--keepCase=false',
      '--longs=String',
      '--enums=String',
      '--defaults=true',
      '--oneofs=true',
    ]);
  });

  it('refuses an option it has no flag for', () => {
    expect(() => genTypesFlags({ ...LOADER_OPTIONS, includeDirs: ['/x'] })).toThrow(
      'loader option includeDirs=["/x"] has no proto-loader-gen-types flag',
    );
    expect(() => genTypesFlags({ longs: BigInt })).toThrow(
      'loader option longs=BigInt has no proto-loader-gen-types flag',
    );
  });
});
