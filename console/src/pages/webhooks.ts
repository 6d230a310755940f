import { page } from '../ui.ts';

export async function webhooksPage(): Promise<void> {
  page('Webhooks');
}
