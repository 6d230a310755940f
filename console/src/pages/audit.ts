import { page } from '../ui.ts';

export async function auditPage(): Promise<void> {
  page('Audit log');
}
