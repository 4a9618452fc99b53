// The notebook side of bettong_nb's kernel bridge (bettong_nb/notebook/frontend.py).
//
// A kernel cannot edit the notebook it serves; this plugin lets it. On every notebook's kernel
// connection it registers the comm target `bettong_nb.notebook`. The kernel opens a comm to it
// and sends requests `{id, op, target, ...args}`; each is answered `{id, ok: true, ...result}` or
// `{id, ok: false, error}`. Every decision lives in the kernel: this side only reads and edits
// the notebook whose kernel asked, through the notebook's shared model, so edits are undoable,
// mark the document dirty and show in every view of it. Nothing the kernel sends is evaluated
// or fetched: sources and outputs are data for the notebook model, never code for this page.

import type { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import type { INotebookModel, NotebookPanel } from '@jupyterlab/notebook';
import type { DocumentRegistry } from '@jupyterlab/docregistry';
import type { Kernel, KernelMessage } from '@jupyterlab/services';

const TARGET = 'bettong_nb.notebook';
// Bumped when a request or an answer changes shape; the kernel reads it from `hello`.
const PROTOCOL = 1;
const HIGHLIGHT_CLASS = 'bettong-proposal-target';
const CELL_TYPES = ['code', 'markdown', 'raw'];

type Context = DocumentRegistry.IContext<INotebookModel>;
type Json = unknown;
type Request = { [key: string]: any };
type Answer = { [key: string]: Json | undefined };

class RequestError extends Error {}

function need(ok: unknown, message: string): asserts ok {
  if (!ok) {
    throw new RequestError(message);
  }
}

function isObject(value: unknown): value is { [key: string]: any } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Answers the requests of one comm: the one the kernel of `context`'s notebook opened. */
class Bridge {
  constructor(
    private readonly app: JupyterFrontEnd,
    private readonly tracker: INotebookTracker,
    private readonly context: Context
  ) {}

  async answer(request: Request): Promise<Answer> {
    need(isObject(request), 'a request is a JSON object');
    const op = request.op;
    need(typeof op === 'string', 'a request names its op');
    switch (op) {
      case 'hello':
        return this.hello();
      case 'cells':
        return { cells: this.shared.cells.map(cellJSON) };
      case 'cell': {
        // One cell (null when no cell has that id): checking a proposal's target before an
        // edit must not cost a read of the whole notebook.
        need(typeof request.cell_id === 'string', 'cell_id must be a string');
        const found = this.shared.cells.find(cell => cell.id === request.cell_id);
        return { cell: found ? cellJSON(found) : null };
      }
      case 'insert_cell':
        return { cell_id: this.insertCell(request) };
      case 'set_source':
        this.setSource(request);
        return {};
      case 'delete_cell': {
        const index = this.indexOf(request.cell_id);
        this.ownStep(() => this.shared.deleteCell(index));
        return {};
      }
      case 'set_metadata':
        this.setMetadata(request);
        return {};
      case 'set_outputs':
        this.setOutputs(request);
        return {};
      case 'highlight':
        await this.highlight(request.cell_id);
        return {};
      case 'notebook_metadata':
        return { metadata: this.shared.getMetadata() };
      case 'save':
        await this.context.save();
        return {};
      default:
        throw new RequestError(`unknown op ${JSON.stringify(op)}`);
    }
  }

  private get shared() {
    const model = this.context.model;
    need(model && !model.isDisposed, 'the notebook is closed');
    return model.sharedModel;
  }

  private hello(): Answer {
    // Notebook 7 calls itself "Jupyter Notebook"; the kernel wants one of two plain names.
    const app = /notebook/i.test(this.app.name) ? 'Notebook' : 'JupyterLab';
    return {
      app,
      app_name: this.app.name,
      versions: { app: this.app.version, protocol: PROTOCOL },
      path: this.context.path
    };
  }

  /** Runs a change to the list of cells as an undo step of its own (`z` in command mode takes
   * back exactly it): yjs would merge changes made within half a second into one step. */
  private ownStep<T>(change: () => T): T {
    const history = (this.shared as any).undoManager as { stopCapturing(): void } | undefined;
    history?.stopCapturing();
    const result = change();
    history?.stopCapturing();
    return result;
  }

  private indexOf(cellId: unknown): number {
    need(typeof cellId === 'string', 'cell_id must be a string');
    const index = this.shared.cells.findIndex(cell => cell.id === cellId);
    need(index >= 0, `no cell with id ${JSON.stringify(cellId)} in ${this.context.path}`);
    return index;
  }

  private insertCell(request: Request): string {
    const { after_id: after, cell_type: cellType, source, metadata } = request;
    need(CELL_TYPES.includes(cellType), `cell_type must be one of ${CELL_TYPES.join(', ')}`);
    need(typeof source === 'string', 'source must be a string');
    need(metadata === undefined || metadata === null || isObject(metadata), 'metadata must be an object');
    const index = after === null || after === undefined ? 0 : this.indexOf(after) + 1;
    return this.ownStep(() =>
      this.shared.insertCell(index, { cell_type: cellType, source, metadata: metadata ?? {} } as any).id
    );
  }

  private setSource(request: Request): void {
    const { source, metadata } = request;
    need(typeof source === 'string', 'source must be a string');
    need(metadata === undefined || metadata === null || isObject(metadata), 'metadata must be an object');
    const cell = this.shared.getCell(this.indexOf(request.cell_id));
    // One transaction, fenced off from the person's own typing so that a single undo (Ctrl-Z
    // in the cell's editor, which drives this cell's undo manager) takes back exactly this.
    const history = (cell as any).undoManager as { stopCapturing(): void } | null | undefined;
    history?.stopCapturing();
    cell.transact(() => {
      cell.setSource(source);
      for (const [key, value] of Object.entries(metadata ?? {})) {
        writeMetadata(cell, key, value);
      }
    });
    history?.stopCapturing();
  }

  private setMetadata(request: Request): void {
    const { key, value } = request;
    need(typeof key === 'string' && key !== '', 'key must be a non-empty string');
    const cell = this.shared.getCell(this.indexOf(request.cell_id));
    // Bookkeeping, not an edit: kept out of the undo history so Ctrl-Z undoes the person's and
    // the agent's edits, not a record of them.
    cell.transact(() => writeMetadata(cell, key, value), false);
  }

  private setOutputs(request: Request): void {
    const { outputs, execution_count: count } = request;
    need(Array.isArray(outputs) && outputs.every(o => isObject(o) && typeof o.output_type === 'string'),
      'outputs must be a list of nbformat output objects');
    need(count === null || count === undefined || Number.isInteger(count), 'execution_count must be an integer or null');
    const cell = this.shared.getCell(this.indexOf(request.cell_id));
    need(cell.cell_type === 'code', `cell ${request.cell_id} is a ${cell.cell_type} cell; only code cells have outputs`);
    const code = cell as any;
    // Like outputs of a run, not undoable edits.
    cell.transact(() => {
      code.setOutputs(outputs);
      code.execution_count = count ?? null;
    }, false);
  }

  private async highlight(cellId: unknown): Promise<void> {
    need(cellId === null || cellId === undefined || typeof cellId === 'string', 'cell_id must be a string or null');
    const index = cellId ? this.indexOf(cellId) : -1;
    // Every view of this notebook (JupyterLab can show one document in several panels).
    const views: NotebookPanel[] = [];
    this.tracker.forEach(panel => {
      if (panel.context === this.context) {
        views.push(panel);
      }
    });
    for (const panel of views) {
      const notebook = panel.content;
      notebook.widgets.forEach(widget => widget.toggleClass(HIGHLIGHT_CLASS, widget.model.id === cellId));
      if (index >= 0 && index < notebook.widgets.length) {
        await notebook.scrollToCell(notebook.widgets[index], 'smart');
      }
    }
  }
}

function cellJSON(cell: { toJSON(): any }): unknown {
  const json = cell.toJSON();
  // The page's trust flag lives in the model's metadata but is not part of the document: it is
  // never saved, so the kernel does not see it either.
  if (isObject(json.metadata)) {
    delete json.metadata.trusted;
  }
  return json;
}

function writeMetadata(cell: any, key: string, value: unknown): void {
  // null removes the key: a cell's metadata holds no undefined, and a removal must be sayable.
  if (value === null || value === undefined) {
    cell.deleteMetadata(key);
  } else {
    cell.setMetadata(key, value);
  }
}

function errorText(error: unknown): string {
  if (error instanceof RequestError) {
    return error.message;
  }
  return `${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
}

/** Answers the requests that come on `comm`, for the notebook of `context`. */
function answerOn(comm: Kernel.IComm, kernel: Kernel.IKernelConnection, bridge: Bridge) {
  const handle = async (msg: KernelMessage.ICommMsgMsg) => {
    const request = msg.content.data as Request;
    const id = isObject(request) ? request.id : null;
    let answer: Answer;
    try {
      answer = { ...(await bridge.answer(request)), id, ok: true };
    } catch (error) {
      answer = { id, ok: false, error: errorText(error) };
    }
    if (!comm.isDisposed && !kernel.isDisposed) {
      comm.send(answer as any);
    }
  };
  comm.onMsg = handle;
  return handle;
}

const served = new WeakSet<Kernel.IKernelConnection>();

/** Registers the comm target on `kernel`, answering for the notebook of `panel`. */
function serve(app: JupyterFrontEnd, tracker: INotebookTracker, panel: NotebookPanel, kernel: Kernel.IKernelConnection): void {
  const context = panel.context;
  // Registered per kernel connection; a restart keeps the connection (and its targets), a
  // kernel change brings a new one, registered from `kernelChanged`.
  kernel.registerCommTarget(TARGET, (comm: Kernel.IComm) => {
    answerOn(comm, kernel, new Bridge(app, tracker, context));
  });
  if (served.has(kernel) || !kernel.handleComms) {
    return;
  }
  served.add(kernel);
  // A reloaded page does not know the comm the kernel opened to the page before: a request on
  // it would go unanswered. Requests name their target, so this page takes the comm over (the
  // kernel's end is still open) and answers, and the kernel never notices the reload.
  kernel.iopubMessage.connect((_, msg) => {
    if (msg.header.msg_type !== 'comm_msg') {
      return;
    }
    const content = (msg as KernelMessage.ICommMsgMsg).content;
    if (!isObject(content.data) || content.data.target !== TARGET || kernel.hasComm(content.comm_id)) {
      return;
    }
    const comm = kernel.createComm(TARGET, content.comm_id);
    void answerOn(comm, kernel, new Bridge(app, tracker, context))(msg as KernelMessage.ICommMsgMsg);
  });
}

function track(app: JupyterFrontEnd, tracker: INotebookTracker, panel: NotebookPanel): void {
  const session = panel.sessionContext;
  const attach = () => {
    const kernel = session.session?.kernel;
    if (kernel) {
      serve(app, tracker, panel, kernel);
    }
  };
  session.kernelChanged.connect(attach);
  panel.disposed.connect(() => session.kernelChanged.disconnect(attach));
  attach();
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'bettong-nb:bridge',
  description: "Lets a notebook's kernel read and edit that notebook (bettong_nb's agent tools).",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(panel => track(app, tracker, panel));
    tracker.widgetAdded.connect((_, panel) => track(app, tracker, panel));
  }
};

export default plugin;
