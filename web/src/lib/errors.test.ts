import { describe, expect, it } from 'vitest';
import { errorText } from './errors';

describe('errorText', () => {
  it('says what happened and when to retry, by code', () => {
    expect(errorText({ code: 'RATE_LIMITED', message: 'too many requests (limit 10/s): retry in 3 s', retryAfter: 3 })).toContain('Try again in 3 seconds');
    expect(errorText({ code: 'BUDGET_EXCEEDED', message: 'the tenant budget for the day is used up' })).toContain('budget');
    expect(errorText({ code: 'BAD_USER_INPUT', message: 'must be 30 to 3600', field: 'timeoutSeconds' })).toBe('Check “timeoutSeconds”: must be 30 to 3600');
    expect(errorText({ code: 'BAD_USER_INPUT', message: 'spendBurst: must be between 1 and 100000 (got -5)', field: 'spendBurst' })).toBe(
      'Check “spendBurst”: must be between 1 and 100000 (got -5)',
    );
    expect(errorText({ code: 'INTERNAL', message: 'internal error' })).toContain('Something went wrong');
  });
});
