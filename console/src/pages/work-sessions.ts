import { page } from '../ui.ts';

export async function workSessionsPage(): Promise<void> {
  page('Work sessions');
}
